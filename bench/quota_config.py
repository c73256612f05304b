"""The quota benchmark's world: Kueue objects (ResourceFlavors, Cohorts, ClusterQueues, LocalQueues) as
manifests, and the workload classes that arrive in each ClusterQueue, modelled on Kueue's large-scale
scheduler performance configuration (`test/performance/scheduler/configs/large-scale/generator.yaml`: 10
cohorts of 100 ClusterQueues, nominal quota 20 with a borrowing limit of 100, reclaimWithinCohort Any,
withinClusterQueue LowerPriority; per queue 35 small, 11 medium and 4 large workloads of 1, 5 and 20 units,
priorities 50, 100 and 200, created every 60, 300 and 700 ms and running 150, 350 and 700 ms).

Two mixes. `kueue` is that configuration as it is: one flavor, cpu only, one pod per workload. `gpu` (the
default) keeps its counts, intervals, runtimes and priorities but makes the units GPUs in gangs on two GPU
flavors with cpu and memory, in a hierarchy (each of the 10 root cohorts has 5 team cohorts of 20 queues;
one team cohort in five has a pool of its own that it lends up to a limit), and varies the queues: one in
ten lends at most 4 GPUs of each flavor, one in ten may not borrow at all (its 20-GPU gangs can never fit:
they are rejected), one in four may borrow by preempting lower priorities (borrowWithinCohort), half prefer
each flavor, and some workloads pin a flavor with a node selector."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Final

KUEUE: Final = "kueue.x-k8s.io/v1beta2"
MODEL_LABEL: Final = "gpu.example.com/model"
GPU: Final = "nvidia.com/gpu"
GPU_FLAVORS: Final = ("h100", "a100")
KUEUE_FLAVOR: Final = "rf"
"""Kueue's generator names its one flavor `rf`."""
NAMESPACE_PREFIX: Final = "team"

KUEUE_CI_MEAN_WALL_S: Final = 1179.411
"""Kueue's large-scale run: mean wall time of 19 periodic CI runs (`rangespec.yaml`: mean=1179411ms)."""
KUEUE_CI_MAX_WALL_S: Final = 1416.0
"""Its CI threshold: the mean x 1.2, rounded up (`maxWallMs: 1_416_000`)."""
KUEUE_CI_MEAN_TIME_TO_ADMISSION_MS: Final = {"small": 700_379, "medium": 256_413, "large": 105_604}
"""Its mean time from creation to admission per class in the same runs."""


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    """Workloads alike arriving in every ClusterQueue: `count` of them, one every `interval_ms`, each a gang
    of `pods` pods asking `per_pod` (canonical amounts, as the core counts them), running `runtime_ms` once
    admitted. `pin_every` > 0: every n-th of them selects the flavor `pin` by node selector."""

    name: str
    count: int
    interval_ms: int
    runtime_ms: int
    priority: int
    pods: int
    per_pod: tuple[tuple[str, int], ...]
    pin_every: int = 0
    pin: str = ""


GIB: Final = 1024**3

KUEUE_CLASSES: Final = (
    WorkloadClass("small", 35, 60, 150, 50, 1, (("cpu", 1_000),)),
    WorkloadClass("medium", 11, 300, 350, 100, 1, (("cpu", 5_000),)),
    WorkloadClass("large", 4, 700, 700, 200, 1, (("cpu", 20_000),)),
)


def _gpu_pod(gpus: int) -> tuple[tuple[str, int], ...]:
    return (("cpu", 8_000 * gpus), ("memory", 64 * GIB * gpus), (GPU, gpus))


GPU_CLASSES: Final = (
    WorkloadClass("small", 35, 60, 150, 50, 1, _gpu_pod(1), pin_every=4, pin="a100"),
    WorkloadClass("medium", 11, 300, 350, 100, 5, _gpu_pod(1), pin_every=3, pin="h100"),
    WorkloadClass("large", 4, 700, 700, 200, 5, _gpu_pod(4)),
)


@dataclass(frozen=True, slots=True)
class QuotaWorld:
    """The benchmark's Kueue objects and what arrives in each ClusterQueue."""

    mix: str
    objects: tuple[dict[str, Any], ...]
    """ResourceFlavors, Cohorts, ClusterQueues and LocalQueues, in the order they can be applied."""
    queues: tuple[str, ...]
    """The ClusterQueues, each with a LocalQueue of its name in namespace `namespace_of(queue)`."""
    classes: tuple[WorkloadClass, ...]

    @property
    def workloads(self) -> int:
        return len(self.queues) * sum(c.count for c in self.classes)

    def count(self, kind: str) -> int:
        return sum(1 for obj in self.objects if obj["kind"] == kind)


def namespace_of(queue: str) -> str:
    """Every ClusterQueue has its own namespace with one LocalQueue of the queue's name (as Kueue's
    generator makes them)."""
    return f"{NAMESPACE_PREFIX}-{queue}"


def build_world(mix: str, cohorts: int, teams: int, queues_per_team: int) -> QuotaWorld:
    """`cohorts` root cohorts of `teams` x `queues_per_team` ClusterQueues (`kueue`: no team level, the
    queues directly in the root cohort)."""
    if mix == "kueue":
        return _kueue_world(cohorts, teams * queues_per_team)
    return _gpu_world(cohorts, teams, queues_per_team)


def _kueue_world(cohorts: int, queues_per_cohort: int) -> QuotaWorld:
    objects: list[dict[str, Any]] = [_flavor(KUEUE_FLAVOR, {})]
    queues = []
    for c in range(cohorts):
        objects.append(_cohort(f"cohort-{c}"))
        for q in range(queues_per_cohort):
            name = f"cq-{c}-{q}"
            group = {
                "coveredResources": ["cpu"],
                "flavors": [
                    {
                        "name": KUEUE_FLAVOR,
                        "resources": [{"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}],
                    }
                ],
            }
            objects.append(_cluster_queue(name, f"cohort-{c}", [group], _KUEUE_PREEMPTION))
            queues.append(name)
    objects += [_local_queue(name) for name in queues]
    return QuotaWorld("kueue", tuple(objects), tuple(queues), KUEUE_CLASSES)


_KUEUE_PREEMPTION: Final = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
_GPU_NOMINAL: Final = {"h100": 12, "a100": 8}
_TEAM_POOL_GPUS: Final = 16
_TEAM_POOL_LENDING: Final = 8


def _gpu_world(cohorts: int, teams: int, queues_per_team: int) -> QuotaWorld:
    objects: list[dict[str, Any]] = [_flavor(name, {MODEL_LABEL: name}) for name in GPU_FLAVORS]
    queues = []
    index = 0
    for c in range(cohorts):
        root = f"org-{c}"
        objects.append(_cohort(root))
        for t in range(teams):
            team = f"team-{c}-{t}"
            pool = (
                [_group({"h100": _quotas(_TEAM_POOL_GPUS, lending=_TEAM_POOL_LENDING)})] if t % 5 == 0 else []
            )
            objects.append(_cohort(team, parent=root, groups=pool))
            for q in range(queues_per_team):
                name = f"cq-{c}-{t}-{q}"
                objects.append(_gpu_queue(name, team, index))
                queues.append(name)
                index += 1
    objects += [_local_queue(name) for name in queues]
    return QuotaWorld("gpu", tuple(objects), tuple(queues), GPU_CLASSES)


def _gpu_queue(name: str, cohort: str, index: int) -> dict[str, Any]:
    """A queue of the gpu mix; its index decides its variant (see the module's docstring)."""
    borrowing = 0 if index % 10 == 7 else 100
    lending = 4 if index % 10 == 3 else None
    order = GPU_FLAVORS if index % 2 == 0 else tuple(reversed(GPU_FLAVORS))
    flavors = {f: _quotas(_GPU_NOMINAL[f], borrowing=borrowing, lending=lending) for f in order}
    preemption: dict[str, Any] = dict(_KUEUE_PREEMPTION)
    if index % 4 == 1:
        preemption["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": 100}
    return _cluster_queue(name, cohort, [_group(flavors)], preemption)


def _quotas(gpus: int, *, borrowing: int | None = None, lending: int | None = None) -> list[dict[str, Any]]:
    """Quotas of `gpus` GPUs with the cpu and memory 8 CPUs and 64 Gi a GPU need; the GPU's limits."""
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": str(gpus)}
    if borrowing is not None:
        gpu["borrowingLimit"] = str(borrowing)
    if lending is not None:
        gpu["lendingLimit"] = str(lending)
    return [
        {"name": "cpu", "nominalQuota": str(8 * gpus)},
        {"name": "memory", "nominalQuota": f"{64 * gpus}Gi"},
        gpu,
    ]


def _group(flavors: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "coveredResources": ["cpu", "memory", GPU],
        "flavors": [{"name": name, "resources": resources} for name, resources in flavors.items()],
    }


def _flavor(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": labels},
    }


def _cohort(
    name: str, *, parent: str | None = None, groups: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if groups:
        spec["resourceGroups"] = groups
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _cluster_queue(
    name: str, cohort: str, groups: list[dict[str, Any]], preemption: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": groups,
            "preemption": preemption,
        },
    }


def _local_queue(queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": queue, "namespace": namespace_of(queue)},
        "spec": {"clusterQueue": queue},
    }


@dataclass(frozen=True, slots=True)
class Arrival:
    """One workload: when it is created (virtual microseconds from the start), in which queue, of which class,
    and the flavor its node selector pins ("" for none)."""

    at_us: int
    queue: str
    workload_class: WorkloadClass
    number: int
    pin: str

    @property
    def name(self) -> str:
        return f"{self.queue}-{self.workload_class.name}-{self.number}"


def arrivals(world: QuotaWorld, *, seed: int, aligned: bool = False) -> list[Arrival]:
    """Every workload, in order of creation. A class's workloads in one queue arrive one interval apart from
    a phase within the interval: Kueue's generator starts every queue's streams at once and each waits its
    interval before each creation, which `aligned` keeps (every phase a whole interval); in real time the
    streams drift apart, which phases drawn with `seed` stand for."""
    rng = random.Random(seed)
    found = []
    for queue in world.queues:
        for workload_class in world.classes:
            interval_us = workload_class.interval_ms * 1000
            phase = 1.0 if aligned else 1.0 - rng.random()
            first = round(phase * interval_us)
            for number in range(workload_class.count):
                every = workload_class.pin_every
                pin = workload_class.pin if every and number % every == every - 1 else ""
                found.append(Arrival(first + number * interval_us, queue, workload_class, number, pin))
    found.sort(key=lambda a: (a.at_us, a.name))
    return found
