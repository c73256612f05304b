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
