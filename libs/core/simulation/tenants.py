"""Teams sharing the fleet by quota in a replay: which team each job belongs to, and the Kueue objects that
give each team its ClusterQueue.

Jobs are split over the teams by a hash of the seed and the job's name (deterministic, and independent of
the order the jobs come in). Each team is a ClusterQueue of one cohort with a nominal quota of the fleet's
GPUs, CPU and memory in proportion to its fair-sharing weight, borrowing without limit, preemption
`reclaimWithinCohort: Any` and `withinClusterQueue: LowerPriority`; a LocalQueue `default` in the team's
namespace queues its jobs there. Nominal quotas follow the weights so that, with every team asking for more
than the fleet, the shares Kueue's fair sharing reaches (nominal quota guaranteed, loans by weighted share)
are the weighted shares themselves."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

KUEUE_API: Final = "kueue.x-k8s.io/v1beta2"
FLAVOR: Final = "default"
COHORT: Final = "fleet"
QUOTA_RESOURCES: Final = ("cpu", "memory", "nvidia.com/gpu")


@dataclass(frozen=True, slots=True)
class Team:
    """A team: its name (its namespace and ClusterQueue) and fair-sharing weight."""

    name: str
    weight: int


DEFAULT_TEAMS: Final = (Team("team-a", 1), Team("team-b", 1), Team("team-c", 2), Team("team-d", 4))


@dataclass(frozen=True, slots=True)
class FleetCapacity:
    """What the fleet has, in the quota's units: millicores, MiB and whole GPUs."""

    cpu_milli: int
    memory_mib: int
    gpus: int

    def as_resources(self) -> dict[str, int]:
        return {"cpu": self.cpu_milli, "memory": self.memory_mib, "nvidia.com/gpu": self.gpus}


def team_of(job_name: str, teams: Sequence[Team], seed: int) -> Team:
    """The team a job belongs to: a hash of the seed and its name, so the split is the same on every run and
    does not depend on which other jobs there are."""
    digest = hashlib.sha256(f"{seed}/{job_name}".encode()).digest()
    return teams[int.from_bytes(digest[:8], "big") % len(teams)]


def nominal_quotas(capacity: FleetCapacity, teams: Sequence[Team]) -> dict[str, dict[str, int]]:
    """Each team's nominal quota per resource: the fleet split by weight, rounded down, what rounding leaves
    going to the last team, so the quotas add up to the fleet."""
    total_weight = sum(team.weight for team in teams)
    quotas: dict[str, dict[str, int]] = {team.name: {} for team in teams}
    for resource, amount in capacity.as_resources().items():
        given = 0
        for team in teams[:-1]:
            share = amount * team.weight // total_weight
            quotas[team.name][resource] = share
            given += share
        quotas[teams[-1].name][resource] = amount - given
    return quotas


def quota_manifests(capacity: FleetCapacity, teams: Sequence[Team] = DEFAULT_TEAMS) -> list[dict[str, Any]]:
    """The ResourceFlavor, Cohort, a ClusterQueue per team and a LocalQueue `default` in each team's
    namespace, as a user would apply them."""
    quotas = nominal_quotas(capacity, teams)
    manifests: list[dict[str, Any]] = [
        _object("ResourceFlavor", FLAVOR, {}),
        _object("Cohort", COHORT, {}),
    ]
    for team in teams:
        manifests.append(_object("ClusterQueue", team.name, _cluster_queue_spec(team, quotas[team.name])))
    for team in teams:
        manifests.append(_object("LocalQueue", "default", {"clusterQueue": team.name}, namespace=team.name))
    return manifests


def _cluster_queue_spec(team: Team, quota: dict[str, int]) -> dict[str, Any]:
    units = {"cpu": "m", "memory": "Mi", "nvidia.com/gpu": ""}
    return {
        "cohortName": COHORT,
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(QUOTA_RESOURCES),
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": r, "nominalQuota": f"{quota[r]}{units[r]}"} for r in QUOTA_RESOURCES
                        ],
                    }
                ],
            }
        ],
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "fairSharing": {"weight": str(team.weight)},
    }


def _object(kind: str, name: str, spec: dict[str, Any], *, namespace: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": metadata, "spec": spec}
