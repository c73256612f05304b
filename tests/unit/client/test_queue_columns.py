"""`podway get` of Kueue's queues: their names, short names and columns."""

from __future__ import annotations

from libs.client.output import resolve_kind, table_rows


def test_kueues_short_names_resolve() -> None:
    assert [resolve_kind(name) for name in ("cq", "lq", "queues", "rf", "cohorts")] == [
        "ClusterQueue",
        "LocalQueue",
        "LocalQueue",
        "ResourceFlavor",
        "Cohort",
    ]


def test_a_cluster_queue_row_shows_its_cohort_and_workload_counts() -> None:
    queue = {
        "metadata": {"name": "team-a"},
        "spec": {"cohortName": "research"},
        "status": {"pendingWorkloads": 1, "admittedWorkloads": 3},
    }

    header, row = table_rows("ClusterQueue", [queue], wide=False, all_namespaces=False)

    assert header[:4] == ["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
    assert row[:4] == ["team-a", "research", "1", "3"]


def test_wide_shows_a_cluster_queues_weighted_share_and_a_cohort_its_parent_and_share() -> None:
    queue = {"metadata": {"name": "team-a", "uid": "u1"}, "status": {"fairSharing": {"weightedShare": 250}}}
    cohort = {
        "metadata": {"name": "research"},
        "spec": {"parentName": "org"},
        "status": {"fairSharing": {"weightedShare": 84}},
    }

    header, row = table_rows("ClusterQueue", [queue], wide=True, all_namespaces=False)
    cohort_header, cohort_row = table_rows("Cohort", [cohort], wide=False, all_namespaces=False)

    assert row[header.index("WEIGHTED SHARE")] == "250"
    assert cohort_header[:3] == ["NAME", "PARENT", "WEIGHTED SHARE"]
    assert cohort_row[:3] == ["research", "org", "84"]
