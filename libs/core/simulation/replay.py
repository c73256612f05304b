"""Dynamic replay: a trace's arrivals and run times through the scheduler state machine on a virtual clock.

The machine is the one the scheduler service runs (`libs/core/scheduling/machine.py`), so the policy is
Podway's own (`podway`). The trace has no jobs and no topology; both are synthesised, seeded:

- Gangs: the GPU pods of each shape, in arrival order, are cut into gangs whose widths are drawn from
  `GangMix` (by default 1, 2, 4 or 8 pods with weights 0.55, 0.20, 0.15, 0.10). A gang arrives with its
  first pod and runs as long as its longest one; a gang of 4 or more asks for one rack (hard), or one block
  when a rack's GPUs cannot hold it. CPU-only pods stay single.
- Topology: nodes in the node list's order, `nodes_per_rack` per rack and `racks_per_block` per block.
- Whole GPUs: a shared GPU (`gpu_milli` < 1,000) is asked for as one whole GPU, because the scheduling core
  counts devices; fractional GPUs are the inflation protocol's (`inflation.py`).
- Priority from the trace's QoS (LS 1000, Guaranteed 800, Burstable 500, BE 0): a cycle that finds
  lower-priority pods in the way asks for preemption, and the preemptor's state machine (the one the
  preemptor service runs) answers it on the same clock: its victims are evicted at once (grace 0) and end
  Preempted, as standalone PodGroups do (the replay's gangs are not Jobs, so nothing recreates them), and
  the room it freed is nominated to the preemptor until its next cycle.

Arrival times are divided by `speedup` and run times kept: the trace is a sample of a cluster's pods (at
most about 50 GPUs of it run at once), so compressing arrivals is what loads the fleet. Each pod's delay is
from its gang's arrival to its bind (virtual seconds); pods still waiting once nothing is left to happen
were never placed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from libs.core.placement import NodeSpec, PodDemand
from libs.core.preemption import NominationEnded, Preempted, PreemptorSettings, PreemptorStateMachine
from libs.core.scheduling import (
    BLOCK_KEY,
    HOSTNAME_KEY,
    RACK_KEY,
    ZONE_KEY,
    MachineSettings,
    PodPhase,
    SchedulerStateMachine,
)
from libs.core.scheduling.inputs import (
    Input,
    Nominated,
    NominationCleared,
    ObjectStored,
    PodsBound,
    PodsEvicted,
    PodsFinished,
    World,
)
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import Binding, CycleRan

from .engine import EventQueue

GPU_CLASS = "gpu.example.com"
WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
RUN_SECONDS = "podway.io/run-seconds"
GPU_RESOURCE = "nvidia.com/gpu"
NAMESPACE = "replay"
IDLE_PASSES = 3
"""Timed passes (back-offs, parked retries) after the last arrival, completion or placement go on until
this many in a row placed nothing; the next arrival or completion starts them again. Without a change a
retry cannot place anything, and pods still waiting at the end were never placed."""
QOS_PRIORITY = {"LS": 1000, "Guaranteed": 800, "Burstable": 500, "BE": 0}


@dataclass(frozen=True, slots=True)
class GangMix:
    """Gang widths and how often each is drawn."""

    widths: tuple[int, ...] = (1, 2, 4, 8)
    weights: tuple[float, ...] = (0.55, 0.20, 0.15, 0.10)


@dataclass(frozen=True, slots=True)
class TimedPod:
    """A pod of the trace with its arrival and run time (trace seconds) and its QoS class."""

    demand: PodDemand
    arrival: float
    run_seconds: float
    qos: str = ""


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """A synthesised gang (or single pod) as the replay submits it, on the virtual clock."""

    name: str
    arrival: float
    run_seconds: float
    pods: tuple[PodDemand, ...]
    priority: int
    topology_key: str | None


@dataclass
class ReplayResult:
    """What happened: each pod's delay, allocation over time, preemption asked, pods never placed."""

    delays: list[float] = field(default_factory=list)
    allocation: list[tuple[float, int]] = field(default_factory=list)
    """(virtual time, GPUs allocated) after each change."""
    total_gpus: int = 0
    pods: int = 0
    gangs: int = 0
    cycles: int = 0
    preemption_requests: int = 0
    gangs_preempted: int = 0
    """PodGroups (or single pods) that lost pods to a preemptor."""
    pods_preempted: int = 0
    never_placed: int = 0
    last_arrival: float = 0.0
    end: float = 0.0
    bound: dict[str, str] = field(default_factory=dict)
    """Pod name -> node."""
    arrived: dict[str, float] = field(default_factory=dict)
    """Pod uid -> virtual time it arrived."""
    binds: list[tuple[float, str]] = field(default_factory=list)
    """(virtual time, pod uid) of each bind."""
    ends: list[tuple[float, str]] = field(default_factory=list)
    """(virtual time, pod uid) of each bound pod that ended (finished or evicted)."""

    def mean_allocation_pct(self, until: float | None = None) -> float:
        """Time-weighted GPU allocation from the start until `until` (the end of the replay by default)."""
        if len(self.allocation) < 2 or not self.total_gpus:
            return 0.0
        end = self.end if until is None else until
        kept = [(t, v) for t, v in self.allocation if t <= end]
        times = np.array([t for t, _ in kept] + [end])
        values = np.array([v for _, v in kept], dtype=np.float64)
        spans = np.diff(times)
        return float((values * spans).sum() / max(spans.sum(), 1e-9) * 100 / self.total_gpus)


def synthesise_jobs(
    pods: Sequence[TimedPod],
    *,
    seed: int,
    speedup: float = 1.0,
    mix: GangMix | None = None,
    rack_gpus: int = 64,
) -> list[ReplayJob]:
    """Gangs cut, in arrival order, from the GPU pods of each shape (widths drawn from the mix), single pods
    otherwise; arrival times divided by `speedup`, run times kept."""
    mix = mix or GangMix()
    rng = np.random.default_rng(seed)
    weights = np.array(mix.weights) / sum(mix.weights)
    ordered = sorted(pods, key=lambda pod: (pod.arrival, pod.demand.name))
    by_shape: dict[tuple[object, ...], list[TimedPod]] = {}
    jobs: list[ReplayJob] = []
    for pod in ordered:
        if pod.demand.gpus:
            by_shape.setdefault(_whole(pod.demand).shape, []).append(pod)
        else:
            jobs.append(_job([pod], speedup, None))
    for shape in sorted(by_shape, key=lambda key: by_shape[key][0].arrival):
        members = by_shape[shape]
        position = 0
        while position < len(members):
            width = int(rng.choice(mix.widths, p=weights))
            gang = members[position : position + width]
            position += width
            gpus = sum(_whole(pod.demand).gpus for pod in gang)
            topology = None if len(gang) < 4 else (RACK_KEY if gpus <= rack_gpus else BLOCK_KEY)
            jobs.append(_job(gang, speedup, topology))
    jobs.sort(key=lambda job: (job.arrival, job.name))
    return jobs


def multiplied(jobs: Sequence[ReplayJob], load: float) -> list[ReplayJob]:
    """The jobs `load` times over: whole copies (`-x1`, `-x2`, ... on the job's and its pods' names) arriving
    with their original, and for a fractional load a copy more of the jobs whose name hashes below the
    fraction (deterministic). What a trace whose demand barely passes the fleet's needs to keep it saturated."""
    if load < 1:
        raise ValueError(f"load: {load:g} must be at least 1")
    whole, fraction = int(load), load - int(load)
    copies: list[ReplayJob] = []
    for job in jobs:
        count = whole + (1 if fraction and _unit_hash(job.name) < fraction else 0)
        copies.append(job)
        for copy in range(1, count):
            pods = tuple(dataclasses.replace(pod, name=f"{pod.name}-x{copy}") for pod in job.pods)
            copies.append(dataclasses.replace(job, name=f"{job.name}-x{copy}", pods=pods))
    copies.sort(key=lambda job: (job.arrival, job.name))
    return copies


def _unit_hash(name: str) -> float:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") / 2.0**64


def _job(members: Sequence[TimedPod], speedup: float, topology: str | None) -> ReplayJob:
    first = members[0].demand.name
    return ReplayJob(
        name=first if len(members) == 1 else f"gang-{first}",
        arrival=members[0].arrival / speedup,
        run_seconds=max(pod.run_seconds for pod in members),
        pods=tuple(_whole(pod.demand) for pod in members),
        priority=max(QOS_PRIORITY.get(pod.qos, 0) for pod in members),
        topology_key=topology,
    )


def _whole(demand: PodDemand) -> PodDemand:
    """The pod asking whole GPUs (a shared GPU counts as one)."""
    if demand.shared:
        return PodDemand(demand.name, demand.cpu_milli, demand.memory_mib, 1, 1000, demand.models)
    return demand


def cluster_manifests(
    nodes: Sequence[NodeSpec], *, nodes_per_rack: int = 8, racks_per_block: int = 4
) -> list[dict[str, Any]]:
    """The GPU DeviceClass, every Node (labelled with its synthesised zone, block and rack) and a
    ResourceSlice of whole GPUs per GPU node."""
    manifests: list[dict[str, Any]] = [
        _manifest(
            "resource.k8s.io/v1",
            "DeviceClass",
            "",
            GPU_CLASS,
            {
                "selectors": [{"cel": {"expression": f'device.driver == "{GPU_CLASS}"'}}],
                "extendedResourceName": GPU_RESOURCE,
            },
        )
    ]
    for index, node in enumerate(nodes):
        rack = index // nodes_per_rack
        labels = {
            ZONE_KEY: "zone-0",
            BLOCK_KEY: f"block-{rack // racks_per_block}",
            RACK_KEY: f"rack-{rack}",
            HOSTNAME_KEY: node.name,
        }
        allocatable = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": "256"}
        node_manifest = _manifest("v1", "Node", "", node.name, {}, labels=labels)
        node_manifest["status"] = {"allocatable": allocatable, "capacity": dict(allocatable)}
        manifests.append(node_manifest)
        if node.gpus:
            devices = [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": node.model}}}
                for i in range(node.gpus)
            ]
            spec = {
                "driver": GPU_CLASS,
                "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
                "nodeName": node.name,
                "devices": devices,
            }
            manifests.append(_manifest("resource.k8s.io/v1", "ResourceSlice", "", f"{node.name}-gpus", spec))
    return manifests


def job_manifests(
    job: ReplayJob, namespace: str = NAMESPACE, *, as_gang: bool = False
) -> list[dict[str, Any]]:
    """A single pod, or a Workload, its gang PodGroup and its pods, as a user would apply them. With
    `as_gang` a single pod is a gang of one too (a standalone pod is not quota-managed)."""
    if len(job.pods) == 1 and not as_gang:
        return [_pod(job.pods[0], job, None, namespace)]
    template: dict[str, Any] = {
        "name": "worker",
        "schedulingPolicy": {"gang": {"minCount": len(job.pods)}},
        "priorityClassName": priority_class_name(job.priority),
    }
    if job.topology_key:
        template["schedulingConstraints"] = {"topology": [{"key": job.topology_key}]}
    group = {
        "podGroupTemplateRef": {"workload": {"workloadName": job.name, "podGroupTemplateName": "worker"}},
        **{key: value for key, value in template.items() if key != "name"},
    }
    return [
        _manifest(WORKLOAD_API, "Workload", namespace, job.name, {"podGroupTemplates": [template]}),
        _manifest(WORKLOAD_API, "PodGroup", namespace, job.name, group),
        *[
            _pod(PodDemand(f"{job.name}-{i}", *pod.shape[:4], pod.models), job, job.name, namespace)
            for i, pod in enumerate(job.pods)
        ],
    ]


def priority_class_name(priority: int) -> str:
    return f"replay-priority-{priority}"


def priority_class_manifests(jobs: Sequence[ReplayJob]) -> list[dict[str, Any]]:
    """One PriorityClass per priority the jobs use."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class_name(priority)},
            "value": priority,
        }
        for priority in sorted({job.priority for job in jobs})
    ]


def stored(manifest: dict[str, Any], *, created: float = 0.0, priority: int | None = None) -> ApiObject:
    """The object a manifest describes, as admission would store it: a uid from its kind and name, and the
    priority its PriorityClass resolves to."""
    metadata = manifest["metadata"]
    namespace = metadata.get("namespace") or ""
    uid = f"{manifest['kind'].lower()}-{namespace}-{metadata['name']}"
    if priority is not None and manifest["kind"] in ("Pod", "PodGroup"):
        manifest = {**manifest, "spec": {**manifest["spec"], "priority": priority}}
    return dataclasses.replace(
        ApiObject.from_manifest(manifest, uid=uid, resource_version=1), created_at=created
    )


def _pod(pod: PodDemand, job: ReplayJob, group: str | None, namespace: str) -> dict[str, Any]:
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.gpus:
        requests[GPU_RESOURCE] = str(pod.gpus)
    spec: dict[str, Any] = {
        "priorityClassName": priority_class_name(job.priority),
        "containers": [{"name": "main", "image": "trace", "resources": {"requests": requests}}],
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    manifest = _manifest("v1", "Pod", namespace, pod.name, spec)
    manifest["metadata"]["annotations"] = {RUN_SECONDS: str(job.run_seconds)}
    return manifest


def _manifest(
    api_version: str,
    kind: str,
    namespace: str,
    name: str,
    spec: dict[str, Any],
    *,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


@dataclass(frozen=True, slots=True)
class Arrival:
    """Objects stored at one virtual time: a job's Workload, PodGroup and pods, or a lone pod."""

    time: float
    objects: tuple[ApiObject, ...]


@dataclass(frozen=True, slots=True)
class _Arrive:
    arrival: Arrival


@dataclass(frozen=True, slots=True)
class _Finish:
    uids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Tick:
    pass


def job_arrival(job: ReplayJob, namespace: str = NAMESPACE, *, as_gang: bool = False) -> Arrival:
    """A job's objects as admission stores them, at the job's arrival (see `job_manifests`)."""
    objects = tuple(
        stored(manifest, created=job.arrival, priority=job.priority)
        for manifest in job_manifests(job, namespace, as_gang=as_gang)
    )
    return Arrival(job.arrival, objects)


def replay(cluster: Sequence[ApiObject], jobs: Sequence[ReplayJob]) -> ReplayResult:
    """Run the jobs through a fresh scheduler state machine that starts from the cluster's objects."""
    return replay_arrivals(cluster, [job_arrival(job) for job in jobs])


class _Machines:
    """The scheduler's state machine and the preemptor's, told the same cluster events (as the services are,
    over the bus)."""

    def __init__(self, cluster: Sequence[ApiObject], *, fair_sharing: bool) -> None:
        world = World(list(cluster), {})
        self.scheduler = SchedulerStateMachine(MachineSettings(fair_sharing=fair_sharing))
        self.scheduler.load(world, now=0.0)
        self.preemptor = PreemptorStateMachine(PreemptorSettings(fair_sharing=fair_sharing))
        self.preemptor.load(world, now=0.0)

    def tell(self, event: Input, now: float) -> None:
        self.scheduler.handle(event, now=now)
        self.preemptor.handle(event, now=now)

    def bound(self, binding: Binding, now: float) -> None:
        """The preemptor hears what the scheduler bound (as from `pods.bound`)."""
        placements = tuple((p.pod_uid, p.node_name, p.devices) for p in binding.placements)
        self.preemptor.handle(PodsBound(placements), now=now)


def replay_arrivals(
    cluster: Sequence[ApiObject], arrivals: Sequence[Arrival], *, fair_sharing: bool = False
) -> ReplayResult:
    """Arrivals, passes, binds, preemptions and completions on the virtual clock, until nothing is left to
    happen, on fresh scheduler and preemptor state machines that start from the cluster's objects (with
    `fair_sharing`, Kueue's `fairSharing.enable` for both). A pod runs for its `podway.io/run-seconds` once
    bound (for ever without it)."""
    machines = _Machines(cluster, fair_sharing=fair_sharing)
    machine = machines.scheduler
    gpus = sum(
        len(obj.spec.get("devices") or ())
        for obj in cluster
        if obj.kind == "ResourceSlice" and obj.spec.get("driver") == GPU_CLASS
    )
    result = ReplayResult(total_gpus=gpus, gangs=len(arrivals))
    events: EventQueue[_Arrive | _Finish | _Tick] = EventQueue()
    arrived = result.arrived
    runs: dict[str, float | None] = {}
    gpus_of: dict[str, int] = {}
    ended: set[str] = set()
    for arrival in arrivals:
        events.at(arrival.time, _Arrive(arrival))
        result.last_arrival = max(result.last_arrival, arrival.time)
    allocated = idle = 0
    result.allocation.append((0.0, 0))
    while len(events):
        now, due = events.take_due()
        for event in due:
            if isinstance(event, _Arrive):
                for obj in event.arrival.objects:
                    if obj.kind == "Pod":
                        arrived[obj.uid] = now
                        runs[obj.uid] = _run_seconds(obj)
                        gpus_of[obj.uid] = _gpus(obj)
                        result.pods += 1
                    machines.tell(ObjectStored(obj), now)
            elif isinstance(event, _Finish):
                # Pods a preemptor evicted ended already.
                done = tuple(uid for uid in event.uids if uid not in ended)
                ended.update(done)
                result.ends += [(now, uid) for uid in done]
                machines.tell(PodsFinished(done, PodPhase.SUCCEEDED), now)
                allocated -= sum(gpus_of[uid] for uid in done)
                result.allocation.append((now, allocated))
        placed = _passes(machines, now, result)
        for binding in placed:
            machines.bound(binding, now)
            ending: dict[float, list[str]] = {}
            for placement in binding.placements:
                uid = placement.pod_uid
                result.delays.append(now - arrived[uid])
                result.binds.append((now, uid))
                result.bound[placement.pod_name] = placement.node_name
                allocated += gpus_of[uid]
                run = runs[uid]
                if run is not None:
                    ending.setdefault(run, []).append(uid)
            result.allocation.append((now, allocated))
            for run, uids in ending.items():
                events.at(now + run, _Finish(tuple(uids)))
        evicted = _preempt(machines, now, result)
        if evicted:
            ended.update(evicted)
            result.ends += [(now, uid) for uid in evicted]
            allocated -= sum(gpus_of[uid] for uid in evicted)
            result.allocation.append((now, allocated))
            events.at(now, _Tick())  # the preemptor's retry may be due at once
        moved = placed or evicted or any(not isinstance(event, _Tick) for event in due)
        idle = 0 if moved else idle + 1
        wakeup = machine.next_wakeup()
        if wakeup is not None and wakeup > now and idle <= IDLE_PASSES and events.next_time() != wakeup:
            events.at(wakeup, _Tick())
    result.end = events.now
    result.never_placed = result.pods - len(result.delays)
    return result


def _passes(machines: _Machines, now: float, result: ReplayResult) -> list[Binding]:
    """Passes at one instant until one runs no cycle (a pass stops after `max_pods_per_pass`); the
    preemption requests they make go to the preemptor."""
    bindings: list[Binding] = []
    while True:
        ran = 0
        for output in machines.scheduler.run_pass(now):
            if isinstance(output, CycleRan):
                ran += 1
                result.cycles += 1
                if output.preemption_priority is not None:
                    result.preemption_requests += 1
                    machines.preemptor.request(output.group.uid, None)
                if output.bind is not None:
                    bindings.append(output.bind)
            elif isinstance(output, Binding):
                bindings.append(output)
        if not ran:
            return bindings


def _preempt(machines: _Machines, now: float, result: ReplayResult) -> list[str]:
    """The preemptor's answers to the requests made so far: the room it frees nominated to the preemptor,
    its victims evicted and ended at once (grace 0); returns their uids."""
    evicted: list[str] = []
    for output in machines.preemptor.run_pass(now):
        if isinstance(output, NominationEnded) and output.announce:
            machines.scheduler.handle(NominationCleared(output.group.uid), now=now)
        elif isinstance(output, Preempted) and output.decision.victims and output.expires_at is not None:
            nominated = Nominated(output.preemptor.uid, output.decision.nodes, output.expires_at)
            machines.scheduler.handle(nominated, now=now)
            uids = tuple(pod.uid for victim in output.decision.victims for pod in victim.pods)
            machines.tell(PodsEvicted(uids), now)
            machines.tell(PodsFinished(uids, PodPhase.FAILED), now)
            result.gangs_preempted += len(output.decision.victims)
            result.pods_preempted += len(uids)
            evicted += uids
    return evicted


def _run_seconds(pod: ApiObject) -> float | None:
    value = (pod.metadata.get("annotations") or {}).get(RUN_SECONDS)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _gpus(pod: ApiObject) -> int:
    """Whole GPUs the pod asks for."""
    total = 0
    for container in pod.spec.get("containers") or ():
        requests = (container.get("resources") or {}).get("requests") or {}
        try:
            total += int(requests.get(GPU_RESOURCE, 0))
        except (TypeError, ValueError):
            continue
    return total


def delay_percentiles(delays: Sequence[float]) -> tuple[float, float]:
    if not delays:
        return math.nan, math.nan
    values = np.array(delays)
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))
