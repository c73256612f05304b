"""The audit log as causal chains: each answer names the event it answered and that event is in the log, each
apply is answered, and no inference request ends twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.waiting import POD_SCHEDULED
from libs.events.catalogue import EventType

from .records import RecordedEvent, Violation, event_time_ms, kept_since_ms

ANSWERS = frozenset(
    event.value
    for event in (
        EventType.PODGROUP_CYCLE_PLACED,
        EventType.PODGROUP_UNSCHEDULABLE,
        EventType.PLACEMENT_PROPOSED,
        EventType.CLAIMS_ALLOCATED,
        EventType.CLAIMS_ALLOCATION_FAILED,
        EventType.PODS_BOUND,
        EventType.PODGROUP_SCHEDULED,
        EventType.PREEMPTION_REQUESTED,
        EventType.PREEMPTION_VICTIMS_SELECTED,
        EventType.PODGROUP_NOMINATED,
        EventType.PODS_RUNNING,
        EventType.PODS_SUCCEEDED,
    )
)
"""Events that only ever answer another event: each must name it (`causation_id`)."""
APPLY_ENDINGS = frozenset(
    event.value
    for event in (
        EventType.PODS_BOUND,
        EventType.PODGROUP_UNSCHEDULABLE,
        EventType.PODS_EVICTED,
        EventType.OBJECT_REJECTED,
        EventType.OBJECT_DELETED,
        EventType.PODGROUP_TIMED_OUT,
    )
)
"""What answers an admitted PodGroup or pod: bound, told why not (yet), evicted, rejected or deleted."""
APPLIES = frozenset({EventType.PODGROUP_ADMITTED.value, EventType.POD_ADMITTED.value})
OUTCOMES = frozenset({EventType.INFERENCE_COMPLETED.value, EventType.INFERENCE_FAILED.value})
ROUTING_STEPS = frozenset({EventType.ROUTER_SPILLOVER.value, EventType.ROUTER_FAILOVER.value})
REQUEST_STEPS = OUTCOMES | ROUTING_STEPS


def answers_name_their_cause(events: Sequence[RecordedEvent]) -> list[Violation]:
    """Every answer names its cause, and every cause an event names is in the log, unless retention took it
    (a cause made, by its UUIDv7, before the oldest event kept is gone by policy, not lost) or it begins an
    inference request's story (the work item that asked for it is no event)."""
    logged = {event.event_id for event in events}
    kept_since = kept_since_ms(events)
    requests_begun: set[str] = set()
    found = []
    for event in events:
        cause = event.causation_id
        begins_request = event.type in REQUEST_STEPS and event.correlation_id not in requests_begun
        if event.type in REQUEST_STEPS:
            requests_begun.add(event.correlation_id)
        if not cause:
            if event.type in ANSWERS:
                found.append(Violation("answer-names-cause", event.event_id, f"{event.type} names no cause"))
        elif begins_request:
            continue
        elif cause not in logged and (event_time_ms(cause) or kept_since) >= kept_since:
            detail = f"{event.type} answers {cause}, which is not in the log"
            found.append(Violation("answer-names-cause", event.event_id, detail))
    return found


def applies_are_answered(events: Iterable[RecordedEvent], told_why: frozenset[str]) -> list[Violation]:
    """Each PodGroup, and each pod of no PodGroup, an apply created is answered later in its story: bound,
    unschedulable (and why), evicted, rejected or deleted. A waiting pod of no PodGroup is told why by its
    `PodScheduled` condition alone, which is no event: `told_why` holds the uids of such pods. A pod of a
    PodGroup is answered in its group's story (its own may begin before the group is stored)."""
    waiting: dict[str, str] = {}
    for event in events:
        if event.type in APPLIES and _created_for_the_scheduler(event):
            waiting.setdefault(event.correlation_id, event.type)
        elif event.type in APPLY_ENDINGS:
            waiting.pop(event.correlation_id, None)
    return [
        Violation("apply-is-answered", story, f"{kind}, then no binding, eviction or rejection")
        for story, kind in sorted(waiting.items())
        if story not in told_why
    ]


def _created_for_the_scheduler(event: RecordedEvent) -> bool:
    if event.payload.get("outcome", "created") != "created":
        return False
    spec = (event.payload.get("object") or {}).get("spec") or {}
    return event.type != EventType.POD_ADMITTED or not (spec.get("schedulingGroup") or {}).get("podGroupName")


def one_outcome_per_request(events: Iterable[RecordedEvent], expected: frozenset[str]) -> list[Violation]:
    """No inference request has two outcomes; each request a harness submitted, and each queued request (its
    story begins by naming the work item that asked for it), has one. A synchronous request's audit events
    may be lost with a router that dies before its group commit: one the log shows routed but not ended is
    no violation."""
    outcomes: Counter[str] = Counter()
    queued: set[str] = set()
    begun: set[str] = set()
    for event in events:
        if event.type not in REQUEST_STEPS:
            continue
        if event.correlation_id not in begun and event.causation_id:
            queued.add(event.correlation_id)
        begun.add(event.correlation_id)
        if event.type in OUTCOMES:
            outcomes[event.correlation_id] += 1
    found = [
        Violation("one-outcome-per-request", request, f"{count} outcomes")
        for request, count in sorted(outcomes.items())
        if count > 1
    ]
    found += [
        Violation("one-outcome-per-request", request, "no outcome")
        for request in sorted(expected | queued)
        if not outcomes[request]
    ]
    return found


def told_why(pods: Iterable[ApiObject]) -> frozenset[str]:
    """Pods the scheduler answered with a `PodScheduled` condition."""
    return frozenset(
        pod.uid
        for pod in pods
        if any(c.get("type") == POD_SCHEDULED for c in pod.status.get("conditions") or [])
    )
