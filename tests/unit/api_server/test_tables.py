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
