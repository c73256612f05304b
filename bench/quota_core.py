"""The quota benchmark's core phase: the pure quota core (`libs.core.quota`) admitting every workload of the
large-scale configuration on a virtual clock, queued and retried the way Kueue's scheduler and queue manager
do it (see `bench.quota` for what is measured and what is left out)."""

from __future__ import annotations

import heapq
import resource
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from bench.measure import percentile
from bench.quota_config import GPU, MODEL_LABEL, Arrival, QuotaWorld, arrivals
from libs.api.manifests import validate_document
from libs.api.models.kueue import ClusterQueue, Cohort, ResourceFlavor
from libs.core.quota import (
    AdmittedWorkload,
    ClusterQueueQuota,
    CohortQuota,
    Flavor,
    Mode,
    PodSetRequest,
    QuotaDecision,
    QuotaSnapshot,
    WorkloadRequest,
    admit,
    preemption_targets,
)
from libs.core.quota.inputs import cluster_queue_of, cohort_of, flavor_of
from libs.core.quota.model import FlavorResource
from libs.core.quota.snapshot import Node
from libs.runtime.memory import freeze_long_lived

T0: Final = datetime(2026, 1, 1, tzinfo=UTC)
"""The virtual clock's zero."""

Lane = tuple[str, str, int]
"""Workloads of a queue that the core cannot tell apart (Kueue's scheduling equivalence hash): their class's
shape, the flavor they pin, and their priority."""


def core_inputs(world: QuotaWorld) -> tuple[list[Flavor], list[CohortQuota], list[ClusterQueueQuota]]:
    """The world's Kueue objects admitted as `podway apply` admits them (schema, defaults, webhook rules),
    then as the core sees them."""
    flavors, cohorts, queues = [], [], []
    for document in world.objects:
        result = validate_document(document)
        if result.obj is None:
            raise ValueError(f"{document['kind']} {document['metadata']['name']}: {result.message}")
        obj = result.obj
        if isinstance(obj, ResourceFlavor):
            flavors.append(flavor_of(obj))
        elif isinstance(obj, Cohort):
            cohorts.append(cohort_of(obj))
        elif isinstance(obj, ClusterQueue):
            queues.append(cluster_queue_of(obj))
    return flavors, cohorts, queues


def workload_request(arrival: Arrival) -> WorkloadRequest:
    """The gang asking its ClusterQueue for quota: one pod set of its class's pods, created when it arrives."""
    shape = arrival.workload_class
    selector = {MODEL_LABEL: arrival.pin} if arrival.pin else {}
    return WorkloadRequest(
        arrival.name,
        arrival.queue,
        shape.priority,
        T0 + timedelta(microseconds=arrival.at_us),
        (PodSetRequest("main", shape.pods, dict(shape.per_pod), selector),),
    )


@dataclass(slots=True)
class _Workload:
    arrival: Arrival
    request: WorkloadRequest
    lane: Lane
    queued_us: int
    """Its place in its queue: its creation, or its eviction (Kueue orders evicted workloads by eviction)."""
    admitted_us: int | None = None
    held: AdmittedWorkload | None = None
    runs: int = 0
    started_us: int = 0

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def order(self) -> tuple[int, int, str]:
        """BestEffortFIFO's order: higher priority, then earlier, then the name."""
        return (-self.request.priority, self.queued_us, self.request.name)


@dataclass(slots=True)
class _Queue:
    """A ClusterQueue's pending workloads by lane: lanes whose workloads may be tried, and lanes parked as
    inadmissible until quota is released in the queue's cohort tree."""

    root: Node
    active: dict[Lane, list[tuple[int, str, _Workload]]] = field(default_factory=dict)
    parked: dict[Lane, list[tuple[int, str, _Workload]]] = field(default_factory=dict)

    def push(self, workload: _Workload) -> bool:
        """Queue a workload (to its parked lane if that lane is parked); whether it may be tried now."""
        entry = (workload.queued_us, workload.name, workload)
        if workload.lane in self.parked:
            heapq.heappush(self.parked[workload.lane], entry)
            return False
        heapq.heappush(self.active.setdefault(workload.lane, []), entry)
        return True

    def pop_head(self) -> _Workload:
        """The first workload of the active lanes in BestEffortFIFO's order."""
        lane = min(self.active, key=lambda k: self.active[k][0][2].order)
        entries = self.active[lane]
        workload = heapq.heappop(entries)[2]
        if not entries:
            del self.active[lane]
        return workload

    def park(self, workload: _Workload) -> None:
        """The workload and every workload of its lane wait for the next requeue (Kueue's bulk move of a
        scheduling equivalence class to the inadmissible workloads, after NoFit or no preemption candidates)."""
        entries = self.active.pop(workload.lane, [])
        heapq.heappush(entries, (workload.queued_us, workload.name, workload))
        self.parked[workload.lane] = entries

    def requeue(self) -> bool:
        """Every parked lane may be tried again; whether there was one."""
        if not self.parked:
            return False
        for lane, entries in self.parked.items():
            self.active[lane] = entries
        self.parked = {}
        return True


@dataclass(slots=True)
class UsageLedger:
    """Usage counted by the benchmark itself from what it admitted and released, against limits read from the
    quota objects alone: a queue holds at most its nominal quota plus its borrowing limit, a cohort tree at
    most the nominal quota of all its nodes."""

    queue_limit: dict[tuple[str, FlavorResource], int]
    tree_limit: dict[tuple[Node, FlavorResource], int]
    queue_used: dict[tuple[str, FlavorResource], int] = field(default_factory=dict)
    tree_used: dict[tuple[Node, FlavorResource], int] = field(default_factory=dict)

    def change(self, queue: str, root: Node, usage: Iterable[tuple[FlavorResource, int]], sign: int) -> bool:
        """Count usage in (sign 1) or out (-1); False when a limit is exceeded."""
        within = True
        for fr, amount in usage:
            key, tree_key = (queue, fr), (root, fr)
            used = self.queue_used[key] = self.queue_used.get(key, 0) + sign * amount
            tree_used = self.tree_used[tree_key] = self.tree_used.get(tree_key, 0) + sign * amount
            limit = self.queue_limit.get(key)
            if (limit is not None and used > limit) or tree_used > self.tree_limit.get(tree_key, 0):
                within = False
        return within


def usage_ledger(snapshot: QuotaSnapshot) -> UsageLedger:
    """An empty ledger with the limits of the snapshot's queues and cohort trees."""
    queue_limit = {}
    tree_limit: dict[tuple[Node, FlavorResource], int] = {}
    for node, quotas in snapshot.quotas.items():
        root = snapshot.root_of(node)
        for fr, quota in quotas.items():
            tree_limit[(root, fr)] = tree_limit.get((root, fr), 0) + quota.nominal
            if node.kind == "ClusterQueue" and quota.borrowing_limit is not None:
                queue_limit[(node.name, fr)] = quota.nominal + quota.borrowing_limit
    return UsageLedger(queue_limit, tree_limit)


@dataclass(slots=True)
class _Figures:
    cycle_s: list[float] = field(default_factory=list)
    cycle_cpu_s: list[float] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    admit_s: list[float] = field(default_factory=list)
    preemption_s: list[float] = field(default_factory=list)
    check_s: float = 0.0
    admitted: int = 0
    rejected: int = 0
    readmitted: int = 0
    preempting: int = 0
    preemptions_without_targets: int = 0
    evicted: int = 0
    requeues: int = 0
    over_quota_admissions: int = 0
    over_quota_cycles: int = 0
    time_to_admission_us: dict[str, list[int]] = field(default_factory=dict)
    used_unit_us: int = 0
    """The main resource's usage integrated over virtual time (GPUs, or millicores in the kueue mix)."""
    last_finish_us: int = 0


_ARRIVE, _FINISH, _REQUEUE = 0, 1, 2


class QuotaAdmissions:
    """The admission loop: a virtual clock, the events it runs (arrivals, completions, batched requeues), and
    the admission cycles between them."""

    def __init__(self, world: QuotaWorld, *, seed: int, aligned: bool, requeue_batch_ms: float) -> None:
        flavors, cohorts, queues = core_inputs(world)
        started = time.perf_counter()
        self.snapshot = QuotaSnapshot(flavors, cohorts, queues)
        self.build_ms = (time.perf_counter() - started) * 1000
        self.empty = self.snapshot.copy()
        """Nothing admitted: a workload that does not fit here never will (rejected)."""
        self.ledger = usage_ledger(self.snapshot)
        self.queues = {
            q.name: _Queue(self.snapshot.root_of(self.snapshot.cluster_queue_node(q.name))) for q in queues
        }
        self.trees: dict[Node, list[str]] = {}
        for name, queue in self.queues.items():
            self.trees.setdefault(queue.root, []).append(name)
        self.main_resource = GPU if world.mix == "gpu" else "cpu"
        self.arrivals = arrivals(world, seed=seed, aligned=aligned)
        self.batch_us = round(requeue_batch_ms * 1000)
        self.events: list[tuple[int, int, int, Any]] = []
        self.sequence = 0
        for arrival in self.arrivals:
            self._schedule(arrival.at_us, _ARRIVE, arrival)
        self.ready: set[str] = set()
        """Queues with an active lane: they have a head."""
        self.requeue_pending: set[Node] = set()
        self.never_fits: dict[tuple[str, Lane], bool] = {}
        self.running: dict[str, _Workload] = {}
        self.figures = _Figures()
        self.now = 0

    def _schedule(self, at_us: int, kind: int, payload: Any) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at_us, self.sequence, kind, payload))

    def run(self) -> tuple[float, float]:
        """Every event and every cycle until nothing is left; returns the wall and CPU time spent, the
        benchmark's own invariant checks excluded."""
        cpu_started, started = time.process_time(), time.perf_counter()
        while self.events or self.ready:
            if not self.ready:
                self.now = self.events[0][0]
            while self.events and self.events[0][0] <= self.now:
                _, _, kind, payload = heapq.heappop(self.events)
                if kind == _ARRIVE:
                    self._arrive(payload)
                elif kind == _FINISH:
                    self._finish(*payload)
                else:
                    self._requeue(payload)
            while self.ready:
                self._cycle()
        checks = self.figures.check_s
        return time.perf_counter() - started - checks, time.process_time() - cpu_started - checks

    # Events.

    def _arrive(self, arrival: Arrival) -> None:
        shape = arrival.workload_class
        request = workload_request(arrival)
        workload = _Workload(arrival, request, (shape.name, arrival.pin, shape.priority), arrival.at_us)
        if self.queues[arrival.queue].push(workload):
            self.ready.add(arrival.queue)

    def _finish(self, workload: _Workload, run: int) -> None:
        if workload.held is None or workload.runs != run:
            return  # evicted before it finished
        self._release(workload)
        self.figures.last_finish_us = max(self.figures.last_finish_us, self.now)

    def _requeue(self, root: Node) -> None:
        self.requeue_pending.discard(root)
        self.figures.requeues += 1
        for name in self.trees[root]:
            if self.queues[name].requeue():
                self.ready.add(name)

    def _notify(self, root: Node) -> None:
        """Quota was released in the tree: its inadmissible workloads are requeued after the batch period,
        once however many releases it gathers (Kueue's inadmissible-workload requeuer)."""
        if root not in self.requeue_pending:
            self.requeue_pending.add(root)
            self._schedule(self.now + self.batch_us, _REQUEUE, root)

    # The admission cycle.

    def _cycle(self) -> None:
        figures = self.figures
        check_before = figures.check_s
        cpu_started, started = time.process_time(), time.perf_counter()
        # 1. The heads: one workload from each queue that has one, in BestEffortFIFO's order.
        heads = []
        for name in self.ready:
            queue = self.queues[name]
            heads.append(queue.pop_head())
        self.ready = {name for name in self.ready if self.queues[name].active}
        heads.sort(key=lambda w: w.order)
        over_quota = False
        # 2. Each head against the quota the ones before it left.
        for workload in heads:
            decision = self._admit(workload)
            if decision.mode is Mode.PREEMPT:
                decision = self._preempt(workload, decision)
            if decision.fits:
                over_quota |= not self._reserve(workload, decision)
            elif decision.mode is Mode.NO_FIT and self._never_fits(workload):
                figures.rejected += 1
            else:
                self._park(workload)
        checks = figures.check_s - check_before
        figures.cycle_s.append(time.perf_counter() - started - checks)
        figures.cycle_cpu_s.append(time.process_time() - cpu_started - checks)
        figures.heads.append(len(heads))
        figures.over_quota_cycles += over_quota

    def _admit(self, workload: _Workload) -> QuotaDecision:
        started = time.perf_counter()
        decision = admit(self.snapshot, workload.request)
        self.figures.admit_s.append(time.perf_counter() - started)
        return decision

    def _preempt(self, workload: _Workload, decision: QuotaDecision) -> QuotaDecision:
        """Evict the targets the core names; they end at once, so the gang is decided again on the quota they
        freed (Kueue admits it in a later cycle, once its victims are gone)."""
        started = time.perf_counter()
        targets = preemption_targets(self.snapshot, workload.request, decision)
        self.figures.preemption_s.append(time.perf_counter() - started)
        if not targets:
            self.figures.preemptions_without_targets += 1
            return decision
        for target in targets:
            self._evict(target.workload.name)
        self.figures.preempting += 1
        return self._admit(workload)

    def _never_fits(self, workload: _Workload) -> bool:
        key = (workload.request.cluster_queue, workload.lane)
        found = self.never_fits.get(key)
        if found is None:
            found = self.never_fits[key] = admit(self.empty, workload.request).mode is Mode.NO_FIT
        return found

    def _park(self, workload: _Workload) -> None:
        queue = self.queues[workload.request.cluster_queue]
        queue.park(workload)
        if not queue.active:
            self.ready.discard(workload.request.cluster_queue)

    def _reserve(self, workload: _Workload, decision: QuotaDecision) -> bool:
        request = workload.request
        held = AdmittedWorkload(
            request.name,
            request.cluster_queue,
            request.priority,
            request.created,
            T0 + timedelta(microseconds=self.now),
            decision.usage,
        )
        self.snapshot.add(held)
        self.running[held.name] = workload
        workload.held, workload.runs, workload.started_us = held, workload.runs + 1, self.now
        figures = self.figures
        if workload.admitted_us is None:
            workload.admitted_us = self.now
            figures.admitted += 1
            waited = self.now - workload.arrival.at_us
            figures.time_to_admission_us.setdefault(workload.arrival.workload_class.name, []).append(waited)
        else:
            figures.readmitted += 1
        self._schedule(
            self.now + workload.arrival.workload_class.runtime_ms * 1000, _FINISH, (workload, workload.runs)
        )
        return self._count(held, 1)

    def _evict(self, name: str) -> None:
        workload = self.running[name]
        self._release(workload)
        self.figures.evicted += 1
        workload.queued_us = self.now
        queue = workload.request.cluster_queue
        if self.queues[queue].push(workload):
            self.ready.add(queue)

    def _release(self, workload: _Workload) -> None:
        held = workload.held
        assert held is not None
        self.snapshot.remove(held)
        del self.running[held.name]
        workload.held = None
        self._count(held, -1)
        main = sum(a for (_, r), a in held.usage.items() if r == self.main_resource)
        self.figures.used_unit_us += main * (self.now - workload.started_us)
        self._notify(self.queues[held.cluster_queue].root)

    def _count(self, held: AdmittedWorkload, sign: int) -> bool:
        started = time.perf_counter()
        within = self.ledger.change(
            held.cluster_queue, self.queues[held.cluster_queue].root, held.usage.items(), sign
        )
        if sign > 0 and not within:
            self.figures.over_quota_admissions += 1
        self.figures.check_s += time.perf_counter() - started
        return within

    def pending(self) -> int:
        """Workloads still queued (none once the run is over: each was admitted or rejected)."""
        return sum(
            len(entries)
            for queue in self.queues.values()
            for lanes in (queue.active, queue.parked)
            for entries in lanes.values()
        )


def run_core(world: QuotaWorld, *, seed: int, aligned: bool, requeue_batch_ms: float) -> dict[str, Any]:
    """Admit every workload of the world through the core; the core phase's metrics."""
    admissions = QuotaAdmissions(world, seed=seed, aligned=aligned, requeue_batch_ms=requeue_batch_ms)
    freeze_long_lived()
    wall_s, cpu_s = admissions.run()
    figures = admissions.figures
    decided = figures.admitted + figures.rejected
    main_nominal = sum(
        quota.nominal
        for node, quotas in admissions.snapshot.quotas.items()
        for (_, resource), quota in quotas.items()
        if resource == admissions.main_resource
    )
    makespan_us = figures.last_finish_us
    metrics: dict[str, Any] = {
        "wall_s": round(wall_s, 3),
        "cpu_s": round(cpu_s, 3),
        "workloads": len(admissions.arrivals),
        "admitted": figures.admitted,
        "rejected": figures.rejected,
        "pending_at_end": admissions.pending(),
        "all_admitted_or_rejected": decided == len(admissions.arrivals) and admissions.pending() == 0,
        "workloads_per_second": round(decided / wall_s, 1) if wall_s else 0.0,
        "cycles": len(figures.cycle_s),
        **_ms("cycle", figures.cycle_s),
        "cycle_cpu_ms_p99": round(percentile(figures.cycle_cpu_s, 0.99) * 1000, 3),
        "heads_per_cycle_mean": round(sum(figures.heads) / max(1, len(figures.heads)), 2),
        "heads_per_cycle_max": max(figures.heads, default=0),
        "admit_calls": len(figures.admit_s),
        **_us("admit", figures.admit_s),
        "preemption_searches": len(figures.preemption_s),
        **_ms("preemption_search", figures.preemption_s),
        "preempting_admissions": figures.preempting,
        "preemptions_without_targets": figures.preemptions_without_targets,
        "evicted": figures.evicted,
        "readmitted_after_eviction": figures.readmitted,
        "requeues": figures.requeues,
        "over_quota_admissions": figures.over_quota_admissions,
        "over_quota_cycles": figures.over_quota_cycles,
        "invariant_check_s": round(figures.check_s, 3),
        "virtual_makespan_s": round(makespan_us / 1e6, 3),
        "mean_usage_percent_of_nominal": round(100 * figures.used_unit_us / (main_nominal * makespan_us), 1)
        if main_nominal and makespan_us
        else 0.0,
        "snapshot_build_ms": round(admissions.build_ms, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    for name, waited in sorted(figures.time_to_admission_us.items()):
        metrics[f"virtual_time_to_admission_ms_mean_{name}"] = round(sum(waited) / len(waited) / 1000, 1)
        metrics[f"virtual_time_to_admission_ms_p99_{name}"] = round(percentile(waited, 0.99) / 1000, 1)
    return metrics


def _ms(prefix: str, seconds: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_ms_p50": round(percentile(seconds, 0.50) * 1000, 3),
        f"{prefix}_ms_p99": round(percentile(seconds, 0.99) * 1000, 3),
        f"{prefix}_ms_max": round(max(seconds, default=0.0) * 1000, 3),
    }


def _us(prefix: str, seconds: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_us_p50": round(percentile(seconds, 0.50) * 1e6, 1),
        f"{prefix}_us_p99": round(percentile(seconds, 0.99) * 1e6, 1),
        f"{prefix}_us_max": round(max(seconds, default=0.0) * 1e6, 1),
    }
