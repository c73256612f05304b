"""Holds point at live nodes: no binding, device allocation or running pod on a node that does not exist, or
whose last word in the audit log is `node.lost`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from libs.core.scheduling.lifecycle import PodPhase
from libs.core.scheduling.objects import ApiObject, pod_phase
from libs.events.catalogue import EventType

from .devices import Holders, PublishedDevice
from .holds import node_of
from .records import RecordedEvent, Violation


def lost_nodes(events: Iterable[RecordedEvent]) -> frozenset[str]:
    """Nodes whose last word is `node.lost`: not heard since (`node.ready`) nor created again."""
    lost: set[str] = set()
    for event in events:
        if event.type == EventType.NODE_LOST:
            lost.add(str(event.payload.get("node")))
        elif event.type == EventType.NODE_READY:
            lost.discard(str(event.payload.get("node")))
        elif event.type == EventType.NODE_REGISTERED and event.payload.get("outcome") == "created":
            lost.discard(str(event.payload.get("name")))
    return frozenset(lost)


def holds_on_live_nodes(
    nodes: frozenset[str],
    lost: frozenset[str],
    pods: Iterable[ApiObject],
    holds: Mapping[str, str],
    holders: Holders,
    devices: Mapping[str, PublishedDevice],
) -> list[Violation]:
    """Every binding, running pod and claim-held device is on a node that exists and was not lost."""

    def dead(node: str | None) -> str | None:
        if node is None:
            return None
        if node not in nodes:
            return f"{node}, which does not exist"
        return f"{node}, which was lost" if node in lost else None

    found = []
    for pod in pods:
        if (why := dead(holds.get(pod.uid))) is not None:
            found.append(Violation("hold-on-live-node", pod.key, f"bound to {why}"))
        elif pod_phase(pod) is PodPhase.RUNNING and (why := dead(node_of(pod, holds))) is not None:
            found.append(Violation("hold-on-live-node", pod.key, f"Running on {why}"))
    for device, by_claim in sorted(holders.items()):
        published = devices.get(device)
        if published is not None and (why := dead(published.node)) is not None:
            for claim in sorted(by_claim):
                found.append(Violation("hold-on-live-node", claim, f"holds {device} on {why}"))
    return found
