"""Teams in a replay: the split of jobs over teams, and the Kueue objects that give each its quota."""

from __future__ import annotations

from collections import Counter

import pytest

from libs.core.placement import PodDemand
from libs.core.simulation.replay import ReplayJob, multiplied
from libs.core.simulation.tenants import (
    DEFAULT_TEAMS,
    FleetCapacity,
    nominal_quotas,
    quota_manifests,
    team_of,
)
from libs.experiments.manifests import admit_offline

FLEET = FleetCapacity(cpu_milli=1_000_001, memory_mib=4_000_003, gpus=6212)


def test_the_split_is_the_same_whatever_the_order_and_other_jobs_and_changes_with_the_seed():
    names = [f"gang-openb-pod-{i:04d}" for i in range(4000)]
    split = {name: team_of(name, DEFAULT_TEAMS, 42).name for name in names}

    assert {name: team_of(name, DEFAULT_TEAMS, 42).name for name in reversed(names)} == split
    assert team_of(names[7], DEFAULT_TEAMS, 42).name == split[names[7]]
    counts = Counter(split.values())
    assert set(counts) == {team.name for team in DEFAULT_TEAMS}
    assert all(900 <= count <= 1100 for count in counts.values())  # about a quarter each
    other_seed = {name: team_of(name, DEFAULT_TEAMS, 43).name for name in names}
    assert sum(other_seed[name] != split[name] for name in names) > 2000


def test_nominal_quotas_split_the_fleet_by_weight_and_add_up_to_it():
    quotas = nominal_quotas(FLEET, DEFAULT_TEAMS)

    assert [quotas[team.name]["nvidia.com/gpu"] for team in DEFAULT_TEAMS] == [776, 776, 1553, 3107]
    for resource, amount in FLEET.as_resources().items():
        assert sum(quota[resource] for quota in quotas.values()) == amount


def test_the_queue_manifests_are_admitted_as_kueue_objects_with_fair_sharing_weights():
    objects = admit_offline(quota_manifests(FLEET))

    kinds = Counter(obj.kind for obj in objects)
    assert kinds == {"ResourceFlavor": 1, "Cohort": 1, "ClusterQueue": 4, "LocalQueue": 4}
    queues = {obj.name: obj.spec for obj in objects if obj.kind == "ClusterQueue"}
    assert {name: spec["fairSharing"]["weight"] for name, spec in queues.items()} == {
        "team-a": "1",
        "team-b": "1",
        "team-c": "2",
        "team-d": "4",
    }
    assert all(spec["cohortName"] == "fleet" for spec in queues.values())
    assert all(
        spec["preemption"]["reclaimWithinCohort"] == "Any"
        and spec["preemption"]["withinClusterQueue"] == "LowerPriority"
        for spec in queues.values()
    )
    local = {(obj.namespace, obj.spec["clusterQueue"]) for obj in objects if obj.kind == "LocalQueue"}
    assert local == {(team.name, team.name) for team in DEFAULT_TEAMS}


def test_a_load_factor_replays_each_job_that_many_times_over_with_names_of_their_own() -> None:
    pod = PodDemand("p-1", 1000, 1024, 1, 1000)
    jobs = [
        ReplayJob("p-1", 5.0, 60.0, (pod,), 0, None),
        ReplayJob("gang-p-2", 1.0, 60.0, (pod, pod), 0, None),
    ]

    doubled = multiplied(jobs, 2)

    assert [(job.name, job.arrival) for job in doubled] == [
        ("gang-p-2", 1.0),
        ("gang-p-2-x1", 1.0),
        ("p-1", 5.0),
        ("p-1-x1", 5.0),
    ]
    assert [pod.name for pod in doubled[3].pods] == ["p-1-x1"]
    many = [ReplayJob(f"j-{i}", float(i), 1.0, (pod,), 0, None) for i in range(1000)]
    half_again = multiplied(many, 1.5)
    assert 1400 <= len(half_again) <= 1600
    assert multiplied(many, 1.5) == half_again, "the fraction is chosen by name, the same every run"
    assert multiplied(jobs, 1) == sorted(jobs, key=lambda job: (job.arrival, job.name))
    with pytest.raises(ValueError, match="at least 1"):
        multiplied(jobs, 0.5)
