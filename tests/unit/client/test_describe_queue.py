"""`podway describe` of Kueue's queues: their workloads, weighted share and usage per flavor."""

from __future__ import annotations

from libs.client.describe import describe

GPU = "nvidia.com/gpu"


def usage(*resources: tuple[str, str, str]) -> list[dict]:
    return [{"name": "h200", "resources": [{"name": n, "total": t, "borrowed": b} for n, t, b in resources]}]


def section(page: str, title: str) -> list[str]:
    lines = page.splitlines()
    start = lines.index(title)
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    return [line.split() for line in lines[start + 1 : end]]


def test_a_cluster_queue_shows_its_usage_per_flavor_beside_its_nominal_quota() -> None:
    quotas = [{"name": "cpu", "nominalQuota": "2560"}, {"name": GPU, "nominalQuota": "320"}]
    queue = {
        "kind": "ClusterQueue",
        "metadata": {"name": "team-llm"},
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["cpu", GPU], "flavors": [{"name": "h200", "resources": quotas}]}
            ]
        },
        "status": {
            "pendingWorkloads": 1,
            "reservingWorkloads": 7,
            "admittedWorkloads": 7,
            "fairSharing": {"weightedShare": 250},
            "flavorsUsage": usage(("cpu", "448", "0"), (GPU, "448", "128")),
        },
    }

    page = describe(queue, [])

    assert "Workloads:    1 pending, 7 reserving, 7 admitted" in page.splitlines()
    assert "Weighted Share: 250" in page.splitlines()
    assert section(page, "Usage:") == [
        ["FLAVOR", "RESOURCE", "NOMINAL", "TOTAL", "BORROWED"],
        ["h200", "cpu", "2560", "448", "0"],
        ["h200", GPU, "320", "448", "128"],
    ]


def test_a_local_queue_shows_what_its_workloads_use() -> None:
    queue = {
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "llm"},
        "status": {
            "pendingWorkloads": 2,
            "flavorsUsage": [{"name": "h200", "resources": [{"name": GPU, "total": "64"}]}],
        },
    }

    page = describe(queue, [])

    assert "Workloads:    2 pending, 0 reserving, 0 admitted" in page.splitlines()
    assert section(page, "Usage:") == [["FLAVOR", "RESOURCE", "TOTAL"], ["h200", GPU, "64"]]


def test_a_queue_that_uses_nothing_says_none() -> None:
    page = describe({"kind": "LocalQueue", "metadata": {"name": "default"}, "status": {}}, [])

    assert section(page, "Usage:") == [["<none>"]]
