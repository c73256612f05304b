"""`podway bench quota`: Kueue's large-scale configuration as the world, and the core phase at a tiny size
admitting or rejecting every workload without any queue or cohort tree ever holding more than its quota."""

from __future__ import annotations

import json

from bench.quota_config import GPU, KUEUE_FLAVOR, MODEL_LABEL, build_world
from bench.quota_core import core_inputs, usage_ledger
from bench.quota_services import admissible, fleet, gang
from libs.client import bench_cli
from libs.core.quota import QuotaSnapshot
from libs.core.quota.snapshot import Node

TINY = ["--phase", "core", "--cohorts", "1", "--teams", "2", "--queues-per-team", "5"]


def test_the_core_phase_admits_or_rejects_every_workload_within_every_quota():
    result = bench_cli.run_one("quota", TINY)

    assert result["name"] == "quota"
    params, metrics = result["params"], result["metrics"]
    assert (params["cluster_queues"], params["workloads"]) == (10, 500)
    assert metrics["workloads"] == 500
    assert metrics["admitted"] + metrics["rejected"] == 500
    assert metrics["pending_at_end"] == 0
    assert metrics["all_admitted_or_rejected"] is True
    # One queue in ten may not borrow: its four 20-GPU gangs never fit its 12 and 8 GPUs.
    assert metrics["rejected"] == 4
    assert metrics["over_quota_admissions"] == metrics["over_quota_cycles"] == 0
    assert metrics["evicted"] == metrics["readmitted_after_eviction"] > 0
    assert metrics["admit_calls"] >= metrics["workloads"] - metrics["rejected"]
    assert 0 < metrics["cycle_ms_p50"] <= metrics["cycle_ms_p99"] <= metrics["cycle_ms_max"]
    assert metrics["virtual_makespan_s"] > 0
    assert metrics["kueue_ci_mean_wall_s"] == 1179.411
    assert all(isinstance(value, int | float | bool) for value in metrics.values())
    json.dumps(result)


def test_the_kueue_mix_is_kueues_large_scale_configuration():
    world = build_world("kueue", 10, 5, 20)
    flavors, cohorts, queues = core_inputs(world)

    assert (len(world.queues), len(cohorts), world.workloads) == (1000, 10, 50_000)
    assert [f.name for f in flavors] == [KUEUE_FLAVOR]
    quota = queues[0].quotas[(KUEUE_FLAVOR, "cpu")]
    assert (quota.nominal, quota.borrowing_limit) == (20_000, 100_000)
    assert (queues[0].preemption.within_cluster_queue, queues[0].preemption.reclaim_within_cohort) == (
        "LowerPriority",
        "Any",
    )
    assert {c.name: (c.count, c.interval_ms, c.runtime_ms, c.priority) for c in world.classes} == {
        "small": (35, 60, 150, 50),
        "medium": (11, 300, 350, 100),
        "large": (4, 700, 700, 200),
    }


def test_the_gpu_mix_puts_a_thousand_queues_in_a_cohort_hierarchy_with_lending_and_borrowing_limits():
    world = build_world("gpu", 10, 5, 20)
    flavors, cohorts, queues = core_inputs(world)

    assert (len(queues), len(cohorts), len(flavors), world.workloads) == (1000, 60, 2, 50_000)
    limits = {
        (q.quotas[("h100", GPU)].borrowing_limit, q.quotas[("h100", GPU)].lending_limit) for q in queues
    }
    assert limits == {(100, None), (100, 4), (0, None)}
    assert {c.parent for c in cohorts} == {None, *(f"org-{i}" for i in range(10))}
    assert sum(1 for c in cohorts if c.quotas) == 10


def test_the_benchmarks_ledger_tells_when_a_queue_or_a_tree_holds_more_than_its_quota():
    world = build_world("gpu", 1, 1, 10)
    flavors, cohorts, queues = core_inputs(world)
    snapshot = QuotaSnapshot(flavors, cohorts, queues)
    root = Node("Cohort", "org-0")
    fr = ("h100", GPU)

    capped = usage_ledger(snapshot)  # cq-0-0-7 may not borrow: 12 GPUs of h100 at most
    assert capped.change("cq-0-0-7", root, [(fr, 12)], 1)
    assert not capped.change("cq-0-0-7", root, [(fr, 1)], 1)
    tree = usage_ledger(snapshot)  # ten queues of 12 and the team's pool of 16: 136 in the tree
    assert tree.change("cq-0-0-0", root, [(fr, 100)], 1)
    assert tree.change("cq-0-0-1", root, [(fr, 36)], 1)
    assert not tree.change("cq-0-0-2", root, [(fr, 1)], 1)
    assert tree.change("cq-0-0-2", root, [(fr, 1)], -1)


def test_the_services_phase_applies_only_gangs_their_queue_could_ever_admit_on_nodes_of_their_flavor():
    world = build_world("gpu", 1, 1, 10)

    backlog = admissible(world, 7, 200)
    nodes = [m for m in fleet(world, 10) if m["kind"] == "Node"]
    group, *pods = gang(backlog[0], "g", 2.0)

    assert len(backlog) == 200
    assert not any(a.queue == "cq-0-0-7" and a.workload_class.name == "large" for a in backlog)
    assert sorted(n["metadata"]["labels"][MODEL_LABEL] for n in nodes) == ["a100"] * 4 + ["h100"] * 6
    assert group["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": backlog[0].queue}
    assert group["metadata"]["namespace"] == f"team-{backlog[0].queue}"
    assert len(pods) == backlog[0].workload_class.pods
    assert pods[0]["spec"]["containers"][0]["resources"]["requests"][GPU] == "1"
    assert pods[0]["metadata"]["annotations"] == {"podway.io/run-seconds": "2"}
