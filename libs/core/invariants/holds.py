"""Holds on nodes: what pods hold ends with them, fits the node, keeps gangs whole, and has its event."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from libs.core.scheduling.lifecycle import PodPhase
from libs.core.scheduling.objects import (
    ApiObject,
    composite_min_group_count,
    core_node,
    parent_composite,
    pod_group_name,
    pod_phase,
    pod_request,
    podgroup_min_count,
)
from libs.events.catalogue import EventType

from .records import RecordedEvent, Violation, kept_since_ms

ENDED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
# After one of these, a pod may be bound again (a restarted gang's pods are placed anew).
POD_ENDINGS = frozenset(
    {EventType.PODS_EVICTED.value, EventType.PODS_FAILED.value, EventType.PODGROUP_RESTARTED.value}
)


def node_of(pod: ApiObject, holds: Mapping[str, str]) -> str | None:
    """The node a pod holds (its binding) or, once it ended and let go, the node it ran on."""
    ran_on = (pod.status.get("podway") or {}).get("nodeName")
    return holds.get(pod.uid) or pod.spec.get("nodeName") or ran_on or None


def holds_end_with_their_pods(pods: Iterable[ApiObject], holds: Mapping[str, str]) -> list[Violation]:
    """A binding is a current hold: an ended pod keeps none."""
    return [
        Violation("hold-ends-with-pod", pod.key, f"{pod_phase(pod)} and still holding {holds[pod.uid]}")
        for pod in pods
        if pod.uid in holds and pod_phase(pod) in ENDED
    ]


def nodes_not_overcommitted(
    nodes: Iterable[ApiObject], pods: Iterable[ApiObject], holds: Mapping[str, str]
) -> list[Violation]:
    """The pods holding a node fit its allocatable CPU, memory and pod count."""
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in pods:
        held = holds.get(pod.uid)
        if held is not None:
            request = pod_request(pod, {})
            used[held].update({"cpu_milli": request.cpu_milli, "memory": request.memory, "pods": 1})
    found = []
    for obj in nodes:
        node = core_node(obj, {})
        room = {"cpu_milli": node.cpu_milli, "memory": node.memory, "pods": node.pods}
        for resource, amount in sorted(used.get(node.name, Counter()).items()):
            if room[resource] and amount > room[resource]:
                detail = f"{resource}: {amount} held, {room[resource]} allocatable"
                found.append(Violation("node-not-overcommitted", node.name, detail))
    return found


def gangs_not_below_min_count(
    groups: Iterable[ApiObject],
    pods: Iterable[ApiObject],
    holds: Mapping[str, str],
    events: Iterable[RecordedEvent] = (),
) -> list[Violation]:
    """A gang was bound whole or not at all: none, or at least minCount, of its pods were placed. A pod bound
    for an earlier PodGroup of the same name (a Job's gang replaced by a new one) counts for that one only."""
    bound_for = {
        str(placement.get("pod_uid")): str(group.get("uid"))
        for event in events
        if event.type == EventType.PODS_BOUND and isinstance(group := event.payload.get("podgroup"), Mapping)
        for placement in event.payload.get("pods") or []
    }
    placed: Counter[tuple[str, str, str]] = Counter()
    for pod in pods:
        name = pod_group_name(pod)
        if name and node_of(pod, holds):
            placed[(pod.namespace, name, bound_for.get(pod.uid, ""))] += 1
    found = []
    for group in groups:
        min_count = podgroup_min_count(group)
        count = placed[(group.namespace, group.name, group.uid)] + placed[(group.namespace, group.name, "")]
        if min_count is not None and 0 < count < min_count:
            detail = f"{count} pods placed, minCount {min_count}"
            found.append(Violation("gang-not-below-min-count", group.key, detail))
    return found


def composites_not_below_min_group_count(
    composites: Iterable[ApiObject],
    groups: Iterable[ApiObject],
    pods: Iterable[ApiObject],
    holds: Mapping[str, str],
) -> list[Violation]:
    """A composite gang was bound whole or not at all: none, or at least minGroupCount, of its child PodGroups
    hold placed pods."""
    holding = {(pod.namespace, name) for pod in pods if (name := pod_group_name(pod)) and node_of(pod, holds)}
    children: Counter[tuple[str, str]] = Counter()
    for group in groups:
        parent = parent_composite(group)
        if parent and (group.namespace, group.name) in holding:
            children[(group.namespace, parent)] += 1
    found = []
    for composite in composites:
        wanted = composite_min_group_count(composite)
        count = children[(composite.namespace, composite.name)]
        if wanted is not None and 0 < count < wanted:
            detail = f"{count} child PodGroups placed, minGroupCount {wanted}"
            found.append(Violation("composite-not-below-min-group-count", composite.key, detail))
    return found


def pods_bound_once(events: Iterable[RecordedEvent]) -> list[Violation]:
    """No pod is bound again unless it ended (evicted, failed, its gang restarted) in between."""
    holding: set[str] = set()
    found = []
    for event in events:
        if event.type == EventType.PODS_BOUND:
            for placement in event.payload.get("pods") or []:
                uid = str(placement.get("pod_uid"))
                if uid in holding:
                    found.append(Violation("pod-bound-once", uid, f"bound again to {placement.get('node')}"))
                holding.add(uid)
        elif event.type in POD_ENDINGS:
            holding.difference_update(_pod_uids(event.payload))
    return found


def state_has_its_event(
    pods: Iterable[ApiObject], holds: Mapping[str, str], events: Sequence[RecordedEvent]
) -> list[Violation]:
    """Every hold has its `pods.bound` and every running pod its `pods.running` in the audit log, unless the
    pod is older than the oldest event the log keeps (retention may have taken its story)."""
    kept_since = kept_since_ms(events)
    bound: set[str] = set()
    running: set[str] = set()
    for event in events:
        if event.type == EventType.PODS_BOUND:
            bound.update(str(p.get("pod_uid")) for p in event.payload.get("pods") or [])
        elif event.type == EventType.PODS_RUNNING:
            running.update(_pod_uids(event.payload))
    found = []
    for pod in pods:
        if 0 < pod.created_at * 1000 < kept_since:
            continue
        if pod.uid in holds and pod.uid not in bound:
            found.append(Violation("binding-has-event", pod.key, f"holds {holds[pod.uid]}, no pods.bound"))
        if pod_phase(pod) is PodPhase.RUNNING and pod.uid not in running:
            found.append(Violation("running-has-event", pod.key, "Running, no pods.running"))
    return found


def _pod_uids(payload: Mapping[str, Any]) -> set[str]:
    uids = {str(p.get("uid")) for p in payload.get("pods") or []}
    uids.update(str(p.get("uid")) for p in payload.get("evicted") or [])
    return uids
