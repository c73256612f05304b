"""Requests between services are answered: each placement proposal by the DRA allocator, each preemption
request by the preemptor, and a gang that could preempt asks again once lower priorities took room.

An answer missing while its asker is still there is what a leader fenced out after consuming a request, and
a successor that never saw it, leave behind."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from libs.core.scheduling.objects import ApiObject, pod_priority
from libs.events.catalogue import EventType

from .records import RecordedEvent, Violation

CLAIMS_ANSWERS = frozenset({EventType.CLAIMS_ALLOCATED.value, EventType.CLAIMS_ALLOCATION_FAILED.value})


def proposals_answered(events: Iterable[RecordedEvent], present: frozenset[str]) -> list[Violation]:
    """Each `placement.proposed` is followed by `claims.allocated` or `claims.allocation_failed` for its group,
    unless the group (a PodGroup, or a standalone pod) is gone; `present` holds the uids of stored objects."""
    waiting: dict[str, str] = {}
    for event in events:
        if event.type == EventType.PLACEMENT_PROPOSED:
            waiting.setdefault(event.correlation_id, event.event_id)
        elif event.type in CLAIMS_ANSWERS:
            waiting.pop(event.correlation_id, None)
    return [
        Violation("proposal-answered", group, f"placement.proposed {proposed} has no claims answer")
        for group, proposed in sorted(waiting.items())
        if group in present
    ]


def preemptions_answered(events: Iterable[RecordedEvent], present: frozenset[str]) -> list[Violation]:
    """Each `preemption.requested` is followed by `preemption.victims_selected` for its group (victims or
    why none), unless the group is gone or was asked for while it held a nomination (room already made)."""
    waiting: dict[str, str] = {}
    nominated: set[str] = set()
    for event in events:
        group = event.correlation_id
        if event.type == EventType.PREEMPTION_REQUESTED and group not in nominated:
            waiting.setdefault(group, event.event_id)
        elif event.type == EventType.PREEMPTION_VICTIMS_SELECTED:
            waiting.pop(group, None)
        elif event.type == EventType.PODGROUP_NOMINATED:
            nominated.add(group)
        elif event.type == EventType.PODGROUP_NOMINATION_CLEARED:
            nominated.discard(group)
    return [
        Violation("preemption-answered", group, f"preemption.requested {requested} has no answer")
        for group, requested in sorted(waiting.items())
        if group in present
    ]


def gangs_ask_again(
    events: Iterable[RecordedEvent], pods: Iterable[ApiObject], present: frozenset[str]
) -> list[Violation]:
    """A group still unschedulable that asked for preemption, and saw pods of a lower priority bound after its
    last request, asked again: those pods are victims its last answer could not have named."""
    priority_of = {pod.uid: pod_priority(pod) for pod in pods}
    asked: dict[str, int] = {}
    """Group -> the priority of its last request, while it waits unscheduled and holds no nomination."""
    outbid: dict[str, str] = {}
    unschedulable: set[str] = set()
    for event in events:
        group = event.correlation_id
        if event.type == EventType.PREEMPTION_REQUESTED:
            asked[group] = int(event.payload.get("priority") or 0)
            outbid.pop(group, None)
        elif event.type == EventType.PODGROUP_NOMINATED:
            asked.pop(group, None)
            outbid.pop(group, None)
        elif event.type == EventType.PODGROUP_UNSCHEDULABLE:
            unschedulable.add(group)
        elif event.type == EventType.PODS_BOUND:
            asked.pop(group, None)
            outbid.pop(group, None)
            unschedulable.discard(group)
            _note_outbid(asked, outbid, _bound_priorities(event.payload, priority_of))
    return [
        Violation("gang-asks-again", group, f"pods of priority {lower} were bound after its last request")
        for group, lower in sorted(outbid.items())
        if group in unschedulable and group in present
    ]


def _bound_priorities(payload: Mapping[str, object], priority_of: Mapping[str, int]) -> list[int]:
    placements = payload.get("pods")
    if not isinstance(placements, list):
        return []
    return [priority_of[uid] for p in placements if (uid := str(p.get("pod_uid"))) in priority_of]


def _note_outbid(asked: Mapping[str, int], outbid: dict[str, str], bound: list[int]) -> None:
    if not bound:
        return
    lowest = min(bound)
    for group, priority in asked.items():
        if lowest < priority and group not in outbid:
            outbid[group] = str(lowest)
