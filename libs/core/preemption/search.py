"""The victim search: which lower-priority units to evict so that a PodGroup fits, with the scheduling
core itself as the judge of "fits".

Per candidate domain of the preemptor's hard topology key (the whole cluster without one):
1. remove every lower-priority candidate in the domain from the snapshot;
2. run the preemptor's scheduling cycle on the domain: if it still does not fit, the domain is no
   solution and nothing in it is evicted;
3. put candidates back, most important first (higher priority; PodGroups before single pods; larger
   groups; earlier start), keeping each one the preemptor still fits without; what stays out are the
   victims, a set from which no unit can be spared;
4. `Pod`-mode groups lose single pods only while at least minCount of them keep running; a group that
   would drop below goes whole.
Domains are searched in order of a lower bound on their cost and the cheapest set wins (lowest highest
priority, then fewest pods, then least run time lost). The snapshot is left as it was found.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from libs.core.scheduling.cycle import schedule_podgroup
from libs.core.scheduling.model import (
    CycleDecision,
    Placement,
    PodGroup,
    ResourceTotals,
    TopologyDomainRef,
)
from libs.core.scheduling.snapshot import ClusterSnapshot

from .candidates import CandidateIndex, Held
from .model import (
    Cost,
    DisruptionMode,
    PreemptionDecision,
    PreemptionReason,
    Preemptor,
    RunningPod,
    SearchSettings,
    UnitOwner,
    Victim,
)

_NO_COST = Cost(-(2**63), 0, 0.0)


@dataclass(slots=True)
class _Unit:
    """Pods that are spared or evicted together."""

    owner: UnitOwner
    pods: list[RunningPod]
    whole: bool
    importance: tuple[int, int, int, float, str]


@dataclass(frozen=True, slots=True)
class _Outcome:
    victims: tuple[Victim, ...]
    decision: CycleDecision
    cost: Cost


def find_victims(
    snapshot: ClusterSnapshot,
    candidates: CandidateIndex,
    preemptor: Preemptor,
    *,
    now: float,
    settings: SearchSettings | None = None,
) -> PreemptionDecision:
    """The cheapest set of whole lower-priority units whose eviction lets `preemptor` fit, or no victims
    and why not. Pods `candidates` does not list (being evicted, or nominated room) are not candidates."""
    settings = settings or SearchSettings()
    group = preemptor.group
    # 1. Groups that may not preempt, or have nothing to place.
    if preemptor.never:
        return _nothing(group, PreemptionReason.NEVER)
    if not preemptor.pods:
        return _nothing(group, PreemptionReason.NOTHING_PENDING)
    # 2. It may fit as things are (room freed since the request): nothing to evict.
    fits = schedule_podgroup(snapshot, group, preemptor.pods, now=now, bound_pods=preemptor.bound_pods)
    if fits.placed:
        return _nothing(group, PreemptionReason.FITS, fits)
    # 3. Domains ranked by a lower bound on what their victims cost; hopeless ones are dropped.
    demand = _demand(preemptor)
    ranked = _ranked_domains(snapshot, candidates, group, demand)
    if not ranked:
        return _nothing(group, _hopeless(candidates, group, fits))
    # 4. Search the most promising domains in full, until none left could beat the best found.
    best: tuple[TopologyDomainRef | None, _Outcome] | None = None
    evaluated = 0
    for bound, value in ranked:
        if evaluated >= settings.max_domains:
            break
        if best is not None and (bound.priority, bound.pods) > (best[1].cost.priority, best[1].cost.pods):
            break
        evaluated += 1
        domain = TopologyDomainRef(group.topology_key, value) if group.topology_key else None
        outcome = _search_domain(snapshot, candidates, preemptor, domain, now)
        if outcome is not None and (best is None or outcome.cost < best[1].cost):
            best = (domain, outcome)
    if best is None:
        return _nothing(group, _hopeless(candidates, group, fits), evaluated=evaluated)
    domain, outcome = best
    reason = PreemptionReason.PREEMPTING.format(
        pods=outcome.cost.pods,
        groups=len(outcome.victims),
        priority=outcome.cost.priority,
        domain=str(domain) if domain else "the cluster",
    )
    return PreemptionDecision(
        group.key,
        outcome.victims,
        domain,
        outcome.decision.placements,
        reason,
        outcome.cost,
        evaluated,
    )


def _nothing(
    group: PodGroup, reason: str, decision: CycleDecision | None = None, *, evaluated: int = 0
) -> PreemptionDecision:
    placements = decision.placements if decision is not None else ()
    domain = decision.domain if decision is not None and decision.domain and decision.domain.key else None
    return PreemptionDecision(group.key, (), domain, placements, reason, None, evaluated)


def _hopeless(candidates: CandidateIndex, group: PodGroup, fits: CycleDecision) -> str:
    lower = any(
        held.pods > 0 and priority < group.priority for priority, held in candidates.held(None, "").items()
    )
    if not lower:
        return PreemptionReason.NO_CANDIDATES.format(priority=group.priority)
    return PreemptionReason.WOULD_NOT_FIT.format(message=fits.message)


# -- ranking domains ---------------------------------------------------------------------------------


def _demand(preemptor: Preemptor) -> dict[str, int]:
    """The least the pods that must fit together ask for, per resource (cheapest pods per resource)."""
    group = preemptor.group
    pods = preemptor.pods
    required = max(1, group.gang_min_count - preemptor.bound_pods) if group.gang_min_count else 1
    required = min(required, len(pods))
    demand = {
        "pods": required,
        "cpu": sum(sorted(pod.cpu_milli for pod in pods)[:required]),
        "memory": sum(sorted(pod.memory for pod in pods)[:required]),
    }
    for cls in {cls for pod in pods for cls in pod.devices}:
        demand[cls] = sum(sorted(pod.devices.get(cls, 0) for pod in pods)[:required])
    return demand


def _ranked_domains(
    snapshot: ClusterSnapshot, candidates: CandidateIndex, group: PodGroup, demand: Mapping[str, int]
) -> list[tuple[Cost, str]]:
    key = group.topology_key
    if key is None:
        free = snapshot.cluster.free()
        bound = _lower_bound(free, candidates.held(None, ""), group.priority, demand, candidates.largest)
        return [] if bound is None else [(bound, "")]
    ranked: list[tuple[Cost, str]] = []
    level = snapshot.level(key)
    for value, domain in level.domains.items():
        bound = _lower_bound(
            domain.free(), candidates.held(key, value), group.priority, demand, candidates.largest
        )
        if bound is not None:
            ranked.append((bound, value))
    ranked.sort()
    return ranked


def _lower_bound(
    free: ResourceTotals,
    held: Mapping[int, Held],
    priority: int,
    demand: Mapping[str, int],
    largest: Mapping[str, int],
) -> Cost | None:
    """No victim set in the domain costs less than this; None when evicting every lower-priority pod
    there would not free enough of some resource.

    The highest victim priority is at least the lowest priority up to which the domain's pods hold what
    is missing; the pod count at least what is missing over the most one pod has ever held."""
    missing = _missing(free, demand)
    if not missing:
        return _NO_COST
    levels = sorted(p for p, h in held.items() if p < priority and h.pods > 0)
    freed: dict[str, int] = dict.fromkeys(missing, 0)
    for level in levels:
        _add_held(freed, held[level])
        if all(freed[resource] >= amount for resource, amount in missing.items()):
            pods = max(math.ceil(amount / max(1, largest.get(r, 1))) for r, amount in missing.items())
            return Cost(level, pods, 0.0)
    return None


def _missing(free: ResourceTotals, demand: Mapping[str, int]) -> dict[str, int]:
    have = {"pods": free.pods, "cpu": free.cpu_milli, "memory": free.memory, **free.devices}
    return {r: amount - have.get(r, 0) for r, amount in demand.items() if amount > have.get(r, 0)}


def _add_held(freed: dict[str, int], held: Held) -> None:
    for resource in freed:
        if resource == "pods":
            freed[resource] += held.pods
        elif resource == "cpu":
            freed[resource] += held.cpu_milli
        elif resource == "memory":
            freed[resource] += held.memory
        else:
            freed[resource] += held.devices.get(resource, 0)


# -- one domain ----------------------------------------------------------------------------------------


def _search_domain(
    snapshot: ClusterSnapshot,
    candidates: CandidateIndex,
    preemptor: Preemptor,
    domain: TopologyDomainRef | None,
    now: float,
) -> _Outcome | None:
    group = preemptor.group
    scoped = dataclasses.replace(group, assigned_domain=domain) if domain is not None else group
    nodes = candidates.nodes_in(domain.key if domain else None, domain.value if domain else "")
    units = _units(candidates, [pod for pod in candidates.on_nodes(nodes) if pod.priority < group.priority])
    if not units:
        return None
    in_reach = {pod.uid for unit in units for pod in unit.pods}
    removed: dict[str, Placement] = {}
    try:
        # 1. Every candidate out; the preemptor must fit then, or the domain is no solution.
        _take_out(snapshot, in_reach, removed)
        decision = _fit(snapshot, scoped, preemptor, now)
        if decision is None:
            return None
        # 2. Spare units, most important first, while the preemptor still fits without them.
        evicted: list[_Unit] = []
        for unit in sorted(units, key=lambda unit: unit.importance):
            _put_back(snapshot, unit.pods, removed)
            spared = _fit(snapshot, scoped, preemptor, now)
            if spared is None:
                _take_out(snapshot, (pod.uid for pod in unit.pods), removed)
                evicted.append(unit)
            else:
                decision = spared
        if not evicted:
            return None
        victims = _victims(candidates, evicted)
        return _Outcome(victims, decision, _cost(victims, now))
    finally:
        # 3. The snapshot as it was.
        for placement in removed.values():
            snapshot.restore(placement)


def _fit(
    snapshot: ClusterSnapshot, group: PodGroup, preemptor: Preemptor, now: float
) -> CycleDecision | None:
    decision = schedule_podgroup(snapshot, group, preemptor.pods, now=now, bound_pods=preemptor.bound_pods)
    return decision if decision.placed else None


def _take_out(snapshot: ClusterSnapshot, uids: Iterable[str], removed: dict[str, Placement]) -> None:
    for uid in uids:
        placement = snapshot.unbind(uid)
        if placement is not None:
            removed[uid] = placement


def _put_back(snapshot: ClusterSnapshot, pods: Sequence[RunningPod], removed: dict[str, Placement]) -> None:
    for pod in pods:
        placement = removed.pop(pod.uid, None)
        if placement is not None:
            snapshot.restore(placement)


def _units(candidates: CandidateIndex, in_domain: list[RunningPod]) -> list[_Unit]:
    """The units the domain's candidates form: a `PodGroup`-mode group is one unit; pods of `Pod`-mode
    groups and standalone pods are units of their own (a group left below its minCount by the pods that
    stay evicted goes whole afterwards, see `_victims`)."""
    by_owner: dict[str, list[RunningPod]] = {}
    for pod in in_domain:
        by_owner.setdefault(pod.group_key, []).append(pod)
    units: list[_Unit] = []
    for key, pods in by_owner.items():
        owner = candidates.owners.get(key)
        if owner is None:
            continue
        pods.sort(key=lambda pod: (-pod.started_at, pod.placement.pod_name))
        total = len(candidates.of_owner(key))
        started = min(pod.started_at for pod in pods)
        if owner.mode == DisruptionMode.POD_GROUP and not owner.standalone:
            units.append(_Unit(owner, pods, True, _importance(owner, False, total, started)))
            continue
        for pod in pods:
            single = _importance(owner, True, 1, pod.started_at)
            units.append(_Unit(owner, [pod], False, single))
    return units


def _importance(
    owner: UnitOwner, single: bool, size: int, started: float
) -> tuple[int, int, int, float, str]:
    """Sort key, most important (spared first) first: higher priority; PodGroups before single pods;
    larger groups; earlier start."""
    return (-owner.priority, 1 if single or owner.standalone else 0, -size, started, owner.key)


def _victims(candidates: CandidateIndex, evicted: list[_Unit]) -> tuple[Victim, ...]:
    """Evicted units per owner; an owner that goes whole loses its pods outside the domain too."""
    by_owner: dict[str, list[RunningPod]] = {}
    whole: set[str] = set()
    for unit in evicted:
        by_owner.setdefault(unit.owner.key, []).extend(unit.pods)
        if unit.whole:
            whole.add(unit.owner.key)
    victims: list[Victim] = []
    for key in sorted(by_owner):
        owner = candidates.owners[key]
        running = candidates.of_owner(key)
        pods = by_owner[key]
        if key not in whole and len(running) - len(pods) < owner.min_count:
            whole.add(key)
        if key in whole:
            pods = running
        ordered = tuple(sorted(pods, key=lambda pod: pod.placement.pod_name))
        victims.append(Victim(owner, ordered, key in whole or len(pods) == len(running)))
    return tuple(victims)


def _cost(victims: Sequence[Victim], now: float) -> Cost:
    pods = [pod for victim in victims for pod in victim.pods]
    return Cost(
        max(victim.owner.priority for victim in victims),
        len(pods),
        round(sum(max(0.0, now - pod.started_at) for pod in pods), 3),
    )
