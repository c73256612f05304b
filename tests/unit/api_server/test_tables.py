"""Tables as `kubectl get` prints them."""

from __future__ import annotations

from libs.kubeapi.resources import lookup
from services.api_server.tables import table_of


def _cells(kind_plural: str, obj: dict) -> list:
    resource = lookup("", "v1", kind_plural)
    assert resource is not None
    return table_of(resource, [obj], 7)["rows"][0]["cells"]


def test_a_node_is_ready_until_its_ready_condition_says_otherwise() -> None:
    node = {"metadata": {"name": "n-1", "labels": {"topology.example.com/rack": "r-1"}}, "status": {}}
    assert _cells("nodes", node)[1:3] == ["Ready", "r-1"]
    node["status"] = {"conditions": [{"type": "Ready", "status": "Unknown"}]}
    assert _cells("nodes", node)[1] == "NotReady"


def test_a_pending_pod_says_why_it_waits() -> None:
    pod = {
        "metadata": {"name": "p"},
        "spec": {"schedulingGroup": {"podGroupName": "g"}},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }
    assert _cells("pods", pod)[1:5] == ["Pending", "<none>", "g", "Unschedulable"]


def test_queues_show_kueues_columns() -> None:
    cluster_queue = lookup("kueue.x-k8s.io", "v1beta2", "clusterqueues")
    local_queue = lookup("kueue.x-k8s.io", "v1beta2", "localqueues")
    assert cluster_queue is not None
    assert local_queue is not None
    status = {"pendingWorkloads": 2, "admittedWorkloads": 5}
    team = {"metadata": {"name": "team-a"}, "spec": {"cohortName": "research"}, "status": status}
    default = {"metadata": {"name": "default", "namespace": "a"}, "spec": {"clusterQueue": "team-a"}}

    assert table_of(cluster_queue, [team], 7)["rows"][0]["cells"][:4] == ["team-a", "research", 2, 5]
    assert table_of(local_queue, [default], 7)["rows"][0]["cells"][:4] == ["default", "team-a", 0, 0]


def test_events_print_upstreams_columns_in_both_groups() -> None:
    from datetime import UTC, datetime, timedelta

    from libs.kubeapi.events import as_events_v1

    seen = (datetime.now(UTC) - timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    core = {
        "metadata": {"name": "p.waiting-podscheduled", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "p"},
        "reason": "FailedScheduling",
        "message": "0/4 nodes are available \n",
        "source": {"component": "scheduler"},
        "firstTimestamp": seen,
        "lastTimestamp": seen,
        "count": 2,
        "type": "Warning",
        "reportingComponent": "scheduler",
        "reportingInstance": "",
    }
    events_v1 = lookup("events.k8s.io", "v1", "events")
    assert events_v1 is not None
    tables = [
        table_of(lookup("", "v1", "events"), [core], 7),  # type: ignore[arg-type]
        table_of(events_v1, [as_events_v1(core)], 7),
    ]
    for table in tables:
        names = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
        assert names == [
            ("Last Seen", 0), ("Type", 0), ("Reason", 0), ("Object", 0), ("Subobject", 1), ("Source", 1),
            ("Message", 0), ("First Seen", 1), ("Count", 1), ("Name", 1),
        ]  # fmt: skip
        (row,) = table["rows"]
        assert row["cells"] == [
            "3m", "Warning", "FailedScheduling", "pod/p", "", "scheduler", "0/4 nodes are available", "3m", 2,
            "p.waiting-podscheduled",
        ]  # fmt: skip
        assert row["object"]["metadata"]["name"] == "p.waiting-podscheduled"
