"""`podway describe node` lists a node's taints, with the unreachable taint while it is not Ready."""

from libs.client.describe import describe


def node(ready: str | None, taints: list[dict[str, str]] | None = None) -> dict:
    conditions = [{"type": "Ready", "status": ready, "reason": "NodeStatusUnknown"}] if ready else []
    return {
        "kind": "Node",
        "metadata": {"name": "n1"},
        "spec": {"taints": taints or []},
        "status": {"conditions": conditions},
    }


def taints_line(page: str) -> str:
    return next(line for line in page.splitlines() if line.startswith("Taints:"))


def test_a_node_not_ready_shows_the_unreachable_taint_beside_its_own() -> None:
    page = describe(node("Unknown", [{"key": "gpu", "value": "h200", "effect": "NoSchedule"}]), [])
    assert taints_line(page).split(maxsplit=1)[1] == (
        "gpu=h200:NoSchedule, node.kubernetes.io/unreachable:NoSchedule"
    )


def test_a_ready_node_without_taints_shows_none() -> None:
    assert taints_line(describe(node("True"), [])).endswith("<none>")
    assert taints_line(describe(node(None), [])).endswith("<none>")
