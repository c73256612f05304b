"""The victim search: which lower-priority units to evict so that a PodGroup fits, with the scheduling
core itself as the judge of "fits".

Per candidate domain of the preemptor's hard topology key (the whole cluster without one):
1. take the domain's lower-priority units out of the snapshot, least important first, until the
   preemptor's scheduling cycle places it there; if it does not fit with all of them out, the domain is
   no solution and nothing in it is evicted (this is "all out, then put back the most important first"
   without the cycles for units that are never needed);
2. put the units taken out back, most important first (higher priority; PodGroups before single pods;
   larger groups; earlier start), keeping each one the preemptor still fits without; what stays out are
   the victims, a set from which no unit can be spared;
3. `Pod`-mode groups lose single pods only while at least minCount of them keep running; a group that
   would drop below goes whole.
Domains are searched in order of a lower bound on their cost, while that bound could beat the best set
found, and the cheapest set wins (lowest highest priority, then fewest pods, then least run time lost).

A unit taken out gives back what its pods hold (capacity, devices, and the shares and reached devices
of their ResourceClaims, see `room.py`; its PodGroup's own claims once none of the group's pods holds
room), so the preemptor's claims, its pods' and its PodGroup's, are allocated on what the victims free,
as its scheduling cycle would; a unit whose devices do not serve them is put back by the reprieve. The
snapshot and the claim allocations are left as they were found.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
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
from libs.core.scheduling.topology import TopologyDomain

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
from .room import TakenOut, put_back, take_out

_NO_COST = Cost(-(2**63), 0, 0.0)
BOUNDS_KEPT = 100_000
"""Per-domain bounds remembered between searches, at most."""
RUN_TIME_TIE_S = 0.01
"""Victim sets whose run time lost differs by less than this cost the same."""


@dataclass(slots=True)
class _Unit:
    """Pods that are spared or evicted together."""

    owner: UnitOwner
    pods: list[RunningPod]
    whole: bool
    importance: tuple[int, int, int, float, str, int]


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
    # 2. Domains ranked by a bound on what their victims cost (a domain that may hold the group as it is
    # first); domains where evicting everything lower would not free enough are dropped.
    demand = _demand(preemptor)
    ranked = _ranked_domains(snapshot, candidates, group, demand, now)
    # 3. Search domains in that order until none left could beat the best set found; a domain's bound is
    # first sharpened from its own pods' run times.
    best: tuple[TopologyDomainRef | None, _Outcome] | None = None
    evaluated = 0
    for bound, value in ranked:
        if evaluated >= settings.max_domains:
            break
        if best is not None and _cannot_beat(bound, best[1].cost):
            break
        domain = TopologyDomainRef(group.topology_key, value) if group.topology_key else None
        if best is not None and _cannot_beat(
            _sharpened(snapshot, candidates, bound, domain, demand, now), best[1].cost
        ):
            continue
        evaluated += 1
        outcome = _search_domain(snapshot, candidates, preemptor, domain, demand, now)
        if outcome is not None and not outcome.victims:
            return _nothing(group, PreemptionReason.FITS, outcome.decision, evaluated=evaluated)
        if outcome is not None and (best is None or outcome.cost < best[1].cost):
            best = (domain, outcome)
    if best is None:
        return _nothing(group, _hopeless(candidates, group), evaluated=evaluated)
    domain, outcome = best
    reason = PreemptionReason.PREEMPTING.format(
        pods=outcome.cost.pods,
        groups=len(outcome.victims),
        priority=outcome.cost.priority,
        domain=str(domain) if domain else "the cluster",
    )
    found = outcome.decision
    return PreemptionDecision(
        group.key,
        outcome.victims,
        domain,
        found.placements,
        reason,
        outcome.cost,
        evaluated,
        found.claims or {},
    )


def _nothing(
    group: PodGroup, reason: str, decision: CycleDecision | None = None, *, evaluated: int = 0
) -> PreemptionDecision:
    placements = decision.placements if decision is not None else ()
    domain = decision.domain if decision is not None and decision.domain and decision.domain.key else None
    return PreemptionDecision(group.key, (), domain, placements, reason, None, evaluated)


def _hopeless(candidates: CandidateIndex, group: PodGroup) -> str:
    lower = any(
        held.pods > 0 and priority < group.priority for priority, held in candidates.held(None, "").items()
    )
    if not lower:
        return PreemptionReason.NO_CANDIDATES.format(priority=group.priority)
    where = f"{group.topology_key} domain" if group.topology_key else "placement in the cluster"
    return PreemptionReason.WOULD_NOT_FIT.format(where=where)


def _cannot_beat(bound: Cost, best: Cost) -> bool:
    """Whether a domain with this bound cannot cost less than the best set found; run times within
    `RUN_TIME_TIE_S` are a tie, which the domain found first keeps."""
    if (bound.priority, bound.pods) != (best.priority, best.pods):
        return (bound.priority, bound.pods) > (best.priority, best.pods)
    return bound.run_seconds + RUN_TIME_TIE_S >= best.run_seconds


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
    snapshot: ClusterSnapshot,
    candidates: CandidateIndex,
    group: PodGroup,
    demand: Mapping[str, int],
    now: float,
) -> list[tuple[Cost, str]]:
    """Domains by their bound, hopeless ones left out. A domain's bound is computed again only when its
    free capacity or its running pods changed since (or for another priority or demand)."""
    key = group.topology_key
    asked = (group.priority, tuple(sorted(demand.items())))
    if len(candidates.bounds) > BOUNDS_KEPT:
        candidates.bounds.clear()
    domains = snapshot.level(key).domains.items() if key is not None else (("", snapshot.cluster),)
    ranked: list[tuple[tuple[int, int, float], str]] = []
    for value, domain in domains:
        state = (
            domain.free_pods,
            domain.free_cpu,
            domain.free_memory,
            tuple(domain.free_devices.values()),
            candidates.version(key, value),
        )
        memo_key = (key, value, asked)
        known = candidates.bounds.get(memo_key)
        if known is not None and known[0] == state:
            parts = known[1]
        else:
            parts = _lower_bound(domain, candidates.held(key, value), group.priority, demand)
            candidates.bounds[memo_key] = (state, parts)
        if parts is not None:
            level, pods, latest = parts
            ranked.append(((level, pods, pods * max(0.0, now - latest)), value))
    ranked.sort()
    return [(Cost(*bound), value) for bound, value in ranked]


def _lower_bound(
    domain: TopologyDomain, held: Mapping[int, Held], priority: int, demand: Mapping[str, int]
) -> tuple[int, int, float] | None:
    """(priority, pods, latest start): no victim set in the domain has a lower highest priority, or at
    that priority fewer pods, or loses less run time than that many pods started at the latest start;
    None when evicting every lower-priority pod there would not free enough of some resource.

    The highest victim priority is at least the lowest priority up to which the domain's pods hold what
    is missing; the pod count at least what is missing over the most one of those pods has held; the run
    time lost at least that many pods times the run time of the youngest. Runs once per domain and
    request, so it is written for speed."""
    missing = _missing_in(domain, demand)
    if not missing:
        return _NO_COST.priority, _NO_COST.pods, math.inf
    wanted = list(missing.items())
    freed = [0] * len(wanted)
    largest = [0] * len(wanted)
    latest = -math.inf
    for level, entry in held.items():
        if level >= priority:
            return None
        if entry.pods <= 0:
            continue
        enough = True
        for position, (resource, amount) in enumerate(wanted):
            if resource == "pods":
                freed[position] += entry.pods
            elif resource == "cpu":
                freed[position] += entry.cpu_milli
            elif resource == "memory":
                freed[position] += entry.memory
            else:
                freed[position] += entry.devices.get(resource, 0)
            most = entry.largest.get(resource, 0)
            if most > largest[position]:
                largest[position] = most
            if freed[position] < amount:
                enough = False
        if entry.latest_start > latest:
            latest = entry.latest_start
        if enough:
            pods = max(-(-amount // max(1, most)) for (_, amount), most in zip(wanted, largest, strict=True))
            return level, pods, latest
    return None


def _sharpened(
    snapshot: ClusterSnapshot,
    candidates: CandidateIndex,
    bound: Cost,
    domain: TopologyDomainRef | None,
    demand: Mapping[str, int],
    now: float,
) -> Cost:
    """The bound with the run time of the domain's own pods: at least what the pods of priority up to the
    bound's that lose the least run time per unit of a missing resource lose freeing it (fractionally)."""
    if bound == _NO_COST:
        return bound
    scope = snapshot.level(domain.key).domains.get(domain.value) if domain else snapshot.cluster
    missing = _missing_in(scope, demand) if scope is not None else dict(demand)
    key, value = (domain.key, domain.value) if domain else (None, "")
    pods = [
        pod for pod in candidates.on_nodes(candidates.nodes_in(key, value)) if pod.priority <= bound.priority
    ]
    run_time = _run_time_bound(pods, missing, now)
    return Cost(bound.priority, bound.pods, max(bound.run_seconds, run_time))


def _run_time_bound(pods: list[RunningPod], missing: Mapping[str, int], now: float) -> float:
    best = 0.0
    for resource, amount in missing.items():
        per_unit: list[tuple[float, int]] = []
        for pod in pods:
            held = _held_by(pod, resource)
            if held > 0:
                per_unit.append((max(0.0, now - pod.started_at) / held, held))
        per_unit.sort()
        lost, left = 0.0, amount
        for cost, held in per_unit:
            take = min(held, left)
            lost += cost * take
            left -= take
            if left <= 0:
                break
        best = max(best, lost)
    return best


def _held_by(pod: RunningPod, resource: str) -> int:
    placement = pod.placement
    if resource == "pods":
        return 1
    if resource == "cpu":
        return placement.cpu_milli
    if resource == "memory":
        return placement.memory
    return len(placement.devices.get(resource, ()))


def _missing_in(domain: TopologyDomain, demand: Mapping[str, int]) -> dict[str, int]:
    """What the domain's free capacity lacks of the demand."""
    missing: dict[str, int] = {}
    devices = domain.free_devices
    for resource, amount in demand.items():
        if resource == "pods":
            have = domain.free_pods
        elif resource == "cpu":
            have = domain.free_cpu
        elif resource == "memory":
            have = domain.free_memory
        else:
            have = devices.get(resource, 0)
        if amount > have:
            missing[resource] = amount - have
    return missing


def _missing(free: ResourceTotals, demand: Mapping[str, int]) -> dict[str, int]:
    have = {"pods": free.pods, "cpu": free.cpu_milli, "memory": free.memory, **free.devices}
    return {r: amount - have.get(r, 0) for r, amount in demand.items() if amount > have.get(r, 0)}


# -- one domain ----------------------------------------------------------------------------------------


def _search_domain(
    snapshot: ClusterSnapshot,
    candidates: CandidateIndex,
    preemptor: Preemptor,
    domain: TopologyDomainRef | None,
    demand: Mapping[str, int],
    now: float,
) -> _Outcome | None:
    """The victims in one domain: the least important units out until the preemptor fits, then every unit
    taken out put back, most important first, unless the preemptor no longer fits without it.

    This is "all candidates out, then reprieve" done lazily: units never taken out are those the reprieve
    would have put back first (the preemptor fits without them), and a unit whose room is needed by the
    domain's aggregates alone is kept out without running a cycle."""
    group = preemptor.group
    scoped = dataclasses.replace(group, assigned_domain=domain) if domain is not None else group
    scope = snapshot.level(domain.key).domains.get(domain.value) if domain else snapshot.cluster
    nodes = candidates.nodes_in(domain.key if domain else None, domain.value if domain else "")
    protected = preemptor.spared
    units = _units(
        candidates,
        [
            pod
            for pod in candidates.on_nodes(nodes)
            if pod.priority < group.priority and pod.group_key not in protected
        ],
    )
    if scope is None:
        return None
    if not _missing(scope.free(), demand):
        as_is = _fit(snapshot, scoped, preemptor, now)
        if as_is is not None:
            return _Outcome((), as_is, _NO_COST)
    if not units:
        return None
    units.sort(key=lambda unit: unit.importance)
    out = _UnitsOut(snapshot, candidates)
    try:
        # 1. The least important units out until the preemptor fits; if all are out and it does not fit,
        # the domain is no solution.
        decision = None
        for position in range(len(units) - 1, -1, -1):
            out.take(position, units[position])
            if not _missing(scope.free(), demand):
                decision = _fit(snapshot, scoped, preemptor, now)
                if decision is not None:
                    break
        if decision is None:
            return None
        # 2. Reprieve, most important first, while the preemptor still fits.
        evicted: list[_Unit] = []
        for position in sorted(out.taken):
            unit = units[position]
            if _missing(_without(scope.free(), out.taken[position].placements), demand):
                evicted.append(unit)
                continue
            out.put_back(position, unit)
            spared = _fit(snapshot, scoped, preemptor, now)
            if spared is None:
                out.take(position, unit)
                evicted.append(unit)
            else:
                decision = spared
        if not evicted:
            return None
        victims = _victims(candidates, evicted)
        return _Outcome(victims, decision, _cost(victims, now))
    finally:
        # 3. The snapshot and the claim allocations as they were.
        out.put_back_all()


class _UnitsOut:
    """Units taken out of the snapshot, by position. A group's own claims go out with the unit that leaves
    none of its pods holding room (a whole `PodGroup` unit, or the last of its pods), and come back with
    the first of its units put back."""

    def __init__(self, snapshot: ClusterSnapshot, candidates: CandidateIndex) -> None:
        self._snapshot = snapshot
        self._candidates = candidates
        self.taken: dict[int, TakenOut] = {}
        self._pods_out: dict[str, int] = {}
        self._groups: dict[str, TakenOut] = {}

    def take(self, position: int, unit: _Unit) -> None:
        key = unit.owner.key
        self.taken[position] = take_out(self._snapshot, [pod.uid for pod in unit.pods])
        self._pods_out[key] = out = self._pods_out.get(key, 0) + len(unit.pods)
        claims = self._snapshot.claims
        if (
            claims is not None
            and claims.holds(key)
            and (unit.whole or out >= len(self._candidates.of_owner(key)))
        ):
            self._groups[key] = take_out(self._snapshot, (), (key,))

    def put_back(self, position: int, unit: _Unit) -> None:
        key = unit.owner.key
        self._pods_out[key] -= len(unit.pods)
        group = self._groups.pop(key, None)
        put_back(self._snapshot, [self.taken.pop(position), *([group] if group is not None else [])])

    def put_back_all(self) -> None:
        put_back(self._snapshot, [*self.taken.values(), *self._groups.values()])
        self.taken.clear()
        self._groups.clear()
        self._pods_out.clear()


def _without(free: ResourceTotals, placements: Sequence[Placement]) -> ResourceTotals:
    """What would be free once these placements are back."""
    devices = dict(free.devices)
    for placement in placements:
        for cls, names in placement.devices.items():
            devices[cls] = devices.get(cls, 0) - len(names)
    return ResourceTotals(
        free.pods - len(placements),
        free.cpu_milli - sum(placement.cpu_milli for placement in placements),
        free.memory - sum(placement.memory for placement in placements),
        devices,
    )


def _fit(
    snapshot: ClusterSnapshot, group: PodGroup, preemptor: Preemptor, now: float
) -> CycleDecision | None:
    decision = schedule_podgroup(snapshot, group, preemptor.pods, now=now, bound_pods=preemptor.bound_pods)
    return decision if decision.placed else None


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
            units += _gang_units(candidates, owner, pods, total, started)
            continue
        for pod in pods:
            units.append(_Unit(owner, [pod], False, _single_importance(owner, pod, started)))
    return units


def _gang_units(
    candidates: CandidateIndex, owner: UnitOwner, pods: list[RunningPod], total: int, started: float
) -> list[_Unit]:
    """A `PodGroup`-mode gang is one unit, except that an elastic gang running more pods than its minCount
    offers its surplus first: each pod above minCount (the highest completion indexes of the whole gang,
    else the latest names) is a unit of its own, less important than any whole gang of its priority, so
    the gang is shrunk to minCount before it, or any gang like it, is evicted."""
    surplus_count = total - owner.min_count if owner.min_count > 0 else 0
    if surplus_count <= 0:
        return [_Unit(owner, pods, True, _importance(owner, False, total, started))]
    surplus = {pod.uid for pod in sorted(candidates.of_owner(owner.key), key=_surplus_order)[:surplus_count]}
    core = [pod for pod in pods if pod.uid not in surplus]
    units = [_Unit(owner, core, True, _importance(owner, False, total, started))] if core else []
    for rank, pod in enumerate(sorted((p for p in pods if p.uid in surplus), key=_surplus_order)):
        units.append(_Unit(owner, [pod], False, _importance(owner, True, 1, started, -rank)))
    return units


def _single_importance(
    owner: UnitOwner, pod: RunningPod, started: float
) -> tuple[int, int, int, float, str, int]:
    """A pod that goes alone: the latest started first, except that an Indexed Job's pods go highest
    completion index first (an elastic gang shrinks from its top)."""
    if pod.index is None:
        return _importance(owner, True, 1, pod.started_at)
    return _importance(owner, True, 1, started, pod.index)


def _surplus_order(pod: RunningPod) -> tuple[int, str]:
    """The pod an elastic gang gives up first comes first: highest completion index, else latest name."""
    return (-(pod.index if pod.index is not None else -1), _reversed(pod.placement.pod_name))


def _reversed(name: str) -> str:
    # Sorting on the negated code points orders names descending while staying a plain ascending key.
    return "".join(chr(0x10FFFF - ord(char)) for char in name)


def _importance(
    owner: UnitOwner, single: bool, size: int, started: float, rank: int = 0
) -> tuple[int, int, int, float, str, int]:
    """Sort key, most important (spared first) first: higher priority; PodGroups before single pods;
    larger groups; earlier start; of an elastic gang's surplus, the lower completion indexes."""
    return (-owner.priority, 1 if single or owner.standalone else 0, -size, started, owner.key, rank)


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
        gone = key in whole or len(pods) == len(running)
        shrunk = not gone and not owner.standalone and owner.min_count > 0
        victims.append(Victim(owner, ordered, gone, shrunk))
    return tuple(victims)


def _cost(victims: Sequence[Victim], now: float) -> Cost:
    pods = [pod for victim in victims for pod in victim.pods]
    return Cost(
        max(victim.owner.priority for victim in victims),
        len(pods),
        round(sum(max(0.0, now - pod.started_at) for pod in pods), 3),
    )
