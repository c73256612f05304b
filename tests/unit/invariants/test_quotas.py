"""`podway check` on quotas: no ClusterQueue holds more than its nominal quota plus its borrowing limit, and
every quota-managed gang holding nodes holds them within its queue's quota."""

from __future__ import annotations

from libs.core.invariants.quotas import gangs_hold_their_quota, queues_within_their_limits, quota_holdings
from libs.core.scheduling.objects import ApiObject
from tests.unit.invariants.builders import gang, pod
from tests.unit.scheduling.manifests import cluster_queue, flavor, local_queue, quota_objects

H200 = {"topology.kubernetes.io/zone": "zone-0"}


def labelled_node(name: str, labels: dict[str, str]) -> ApiObject:
    return ApiObject("Node", "", name, f"uid-{name}", {"labels": labels}, {}, {"allocatable": {"cpu": "64"}})


def violations(objects: list[ApiObject], holds: dict[str, str]) -> list[tuple[str, str, str]]:
    ledger, holdings, labels = quota_holdings(objects, holds)
    found = queues_within_their_limits(ledger, holdings, labels) + gangs_hold_their_quota(
        ledger, holdings, labels
    )
    return [(v.invariant, v.subject, v.detail) for v in found]


def team(gpus: int, *, borrowing_limit: str | None = None) -> list[ApiObject]:
    queue = cluster_queue("team-a", gpus, cohort="research")
    if borrowing_limit is not None:
        quotas = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        quotas[2]["borrowingLimit"] = borrowing_limit
    return quota_objects(
        flavor(), queue, cluster_queue("team-b", 8, cohort="research"), local_queue("ml", "team-a")
    )


def running_gang(name: str, pods: int, node: str) -> tuple[list[ApiObject], dict[str, str]]:
    members = [pod(f"{name}-{i}", group=name, phase="Running", gpus=8) for i in range(pods)]
    return [gang(name, pods), *members], {member.uid: node for member in members}


def test_gangs_within_their_queues_quota_break_nothing():
    objects, holds = running_gang("g", 2, "n1")

    assert violations([*team(16), labelled_node("n1", H200), *objects], holds) == []


def test_a_queue_holding_more_than_its_nominal_quota_and_borrowing_limit_is_reported():
    objects, holds = running_gang("g", 3, "n1")

    found = violations([*team(8, borrowing_limit="8"), labelled_node("n1", H200), *objects], holds)

    assert found == [
        ("queue-within-quota", "team-a", "nvidia.com/gpu in flavor h200: 24 held, at most 16 allowed")
    ]


def test_a_gang_on_nodes_of_no_flavor_of_its_queue_lacks_its_reservation():
    objects, holds = running_gang("g", 1, "n1")

    found = violations(
        [*team(16), labelled_node("n1", {"topology.kubernetes.io/zone": "zone-9"}), *objects], holds
    )

    assert [(invariant, subject) for invariant, subject, _ in found] == [
        ("gang-holds-its-quota", "ml/g"),
        ("gang-holds-its-quota", "ml/g"),
    ]
    assert found[1][2] == "pod g-0 holds nvidia.com/gpu on n1 outside ClusterQueue team-a"


def test_gangs_of_namespaces_without_a_local_queue_are_not_counted():
    objects, holds = running_gang("g", 4, "n1")
    free = [ApiObject(o.kind, "free", o.name, o.uid, o.metadata, o.spec, o.status) for o in objects]

    assert violations([*team(8), labelled_node("n1", H200), *free], holds) == []
