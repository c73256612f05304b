"""Kubernetes Events made from Podway's audit log: one core/v1 Event per audited fact about an object, and one
per pod a fact names (a pod bound, running, failed), so that `kubectl describe` and `kubectl get events` tell
the story `podway events` tells."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

_REASONS: Final[dict[str, str]] = {
    "podgroup.cycle.placed": "Scheduled",
    "podgroup.unschedulable": "FailedScheduling",
    "podgroup.scheduled": "Scheduled",
    "pods.bound": "Scheduled",
    "pods.running": "Started",
    "pods.succeeded": "Completed",
    "pods.failed": "Failed",
    "pods.evicted": "Preempted",
    "object.admitted": "Admitted",
    "object.rejected": "Rejected",
    "claims.allocation_failed": "FailedAllocation",
    "node.lost": "NodeLost",
}
_WARNINGS: Final = ("fail", "unschedulable", "rejected", "evicted", "lost", "timed_out", "disrupted")


def reason_of(event_type: str) -> str:
    """Upstream's reason where one fits (`Scheduled`, `FailedScheduling`, ...), else the type in CamelCase."""
    if event_type in _REASONS:
        return _REASONS[event_type]
    parts = event_type.split(".")[1:] or event_type.split(".")
    return "".join(word.capitalize() for part in parts for word in part.split("_"))


def type_of(event_type: str) -> str:
    return "Warning" if any(word in event_type for word in _WARNINGS) else "Normal"


DELETED: Final = "Deleted"
"""The `pods.evicted` reason of a pod deleted while it ran (libs/core/admission/delete.py)."""


def _reason_and_type(event_type: str, payload: Mapping[str, Any]) -> tuple[str, str]:
    """A pod stopped because it was deleted is the kubelet's `Killing` (Normal), not a preemption."""
    if event_type == "pods.evicted" and payload.get("reason") == DELETED:
        return "Killing", "Normal"
    return reason_of(event_type), type_of(event_type)


def kube_events(seq: int, envelope: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The Events one audited envelope (as `podway events` returns it) becomes."""
    subject = envelope.get("subject") or {}
    if subject.get("name"):
        yield _event(seq, 0, envelope, subject)
    for index, pod in enumerate(_pods_named(envelope.get("payload") or {}), start=1):
        if (pod.get("name"), subject.get("kind")) != (subject.get("name"), "Pod"):
            yield _event(seq, index, envelope, {"kind": "Pod", **pod})


WAITING: Final = ".waiting-"
"""In a waiting event's name, between its object's name and its condition's type."""


def waiting_of(event_name: str) -> str | None:
    """The name of the object a waiting event (see waiting_event) is about; None for any other event."""
    about, found, _ = event_name.rpartition(WAITING)
    return about if found else None


def waiting_event(obj: Mapping[str, Any], condition: Mapping[str, Any]) -> dict[str, Any]:
    """An object's False condition (why it waits) as a Warning Event: `FailedScheduling` for a pod or gang
    that is not placed, as the scheduler reports it upstream."""
    metadata = obj.get("metadata") or {}
    when = str(condition.get("lastTransitionTime") or metadata.get("creationTimestamp") or "")
    reason = (
        "FailedScheduling" if condition.get("reason") == "Unschedulable" else str(condition.get("reason"))
    )
    name, kind = metadata.get("name"), obj.get("kind")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}{WAITING}{str(condition.get('type')).lower()}",
            "namespace": metadata.get("namespace") or "default",
            "uid": f"{metadata.get('uid')}-{condition.get('type')}",
            "creationTimestamp": when,
        },
        "involvedObject": {
            "kind": kind,
            "namespace": metadata.get("namespace"),
            "name": name,
            "uid": metadata.get("uid"),
        },
        "reason": reason,
        "message": str(condition.get("message") or condition.get("reason")),
        "source": {"component": "scheduler"},
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
        "type": "Warning",
        "reportingComponent": "scheduler",
        "reportingInstance": "",
        "eventTime": _micro_time(when),
    }


def _pods_named(payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    pods = payload.get("pods")
    if not isinstance(pods, list):  # some events count their pods (`"pods": 4`) rather than name them
        return
    for entry in pods:
        if not isinstance(entry, dict):
            continue
        name = entry.get("name") or entry.get("pod")
        if isinstance(name, str):
            yield {
                "name": name,
                "namespace": entry.get("namespace"),
                "uid": entry.get("uid") or entry.get("pod_uid"),
            }


def _event(seq: int, index: int, envelope: Mapping[str, Any], about: Mapping[str, Any]) -> dict[str, Any]:
    event_type = str(envelope.get("type") or "")
    reason, kind = _reason_and_type(event_type, envelope.get("payload") or {})
    namespace = about.get("namespace") or "default"
    when = _timestamp(envelope.get("occurred_at"))
    involved = {"kind": about.get("kind"), "namespace": about.get("namespace"), "name": about.get("name")}
    if about.get("uid"):
        involved["uid"] = about["uid"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{about.get('name')}.{seq:x}{index:02x}",
            "namespace": namespace,
            "uid": f"{envelope.get('event_id')}-{index}",
            "creationTimestamp": when,
        },
        "involvedObject": {k: v for k, v in involved.items() if v},
        "reason": reason,
        "message": _message(event_type, envelope.get("payload") or {}),
        "source": {"component": str(envelope.get("producer") or "podway")},
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
        "type": kind,
        "reportingComponent": str(envelope.get("producer") or "podway"),
        "reportingInstance": "",
        "eventTime": _micro_time(envelope.get("occurred_at")),
    }


def _message(event_type: str, payload: Mapping[str, Any]) -> str:
    for key in ("message", "reason", "outcome"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return f"{event_type}: {value.splitlines()[0]}"
    placements = payload.get("pods")
    if isinstance(placements, list) and placements and isinstance(placements[0], dict):
        nodes = sorted({str(p.get("node")) for p in placements if p.get("node")})
        if nodes:
            return f"{event_type}: {len(placements)} pod(s) on {', '.join(nodes[:3])}" + (
                f" and {len(nodes) - 3} more nodes" if len(nodes) > 3 else ""
            )
    return event_type


def _micro_time(value: Any) -> str | None:
    """A `MicroTime` (what events.k8s.io/v1 requires of `eventTime`): RFC 3339 in UTC with microseconds."""
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _timestamp(value: Any) -> str:
    text = str(value or "")
    return text[:19] + "Z" if len(text) >= 19 else text


def as_events_v1(event: Mapping[str, Any]) -> dict[str, Any]:
    """A core/v1 Event as `events.k8s.io/v1` shows it."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": event.get("metadata") or {},
        "eventTime": event.get("eventTime"),
        "regarding": event.get("involvedObject") or {},
        "reason": event.get("reason"),
        "note": event.get("message"),
        "type": event.get("type"),
        "reportingController": event.get("reportingComponent"),
        "reportingInstance": event.get("reportingInstance"),
        "deprecatedFirstTimestamp": event.get("firstTimestamp"),
        "deprecatedLastTimestamp": event.get("lastTimestamp"),
        "deprecatedCount": event.get("count"),
        "deprecatedSource": event.get("source"),
    }
