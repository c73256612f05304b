"""`podway describe` pages and one-line renderings of audit-log events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import yaml


def _summary(event: dict[str, Any]) -> str:
    payload = event.get("payload") or {}
    for key in ("message", "outcome", "reason"):
        if isinstance(payload.get(key), str) and payload[key]:
            return str(payload[key]).splitlines()[0]
    if isinstance(payload.get("nodes"), list) and "expires_at" in payload:
        nodes = payload["nodes"]
        shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        return f"room held on {shown} until {_clock(payload['expires_at'])}"
    if isinstance(payload.get("placements"), list):
        domain = (payload.get("domain") or {}).get("value")
        return f"{len(payload['placements'])} pod(s) placed" + (f" in {domain}" if domain else "")
    if isinstance(payload.get("pods"), list):
        return f"{len(payload['pods'])} pod(s)"
    if isinstance(payload.get("pods"), int):
        return f"attempt {payload.get('attempt', 1)}: {payload['pods']} pod(s), minCount {payload.get('min_count')}"
    return ""


def _clock(seconds: Any) -> str:
    try:
        return datetime.fromtimestamp(float(seconds), UTC).strftime("%H:%M:%S")
    except (TypeError, ValueError, OverflowError):
        return str(seconds)


def event_line(event: dict[str, Any]) -> str:
    """`seq  time  type  subject  summary` for one event."""
    subject = event.get("subject") or {}
    ref = "/".join(p for p in (subject.get("kind"), subject.get("namespace"), subject.get("name")) if p)
    when = str(event.get("occurred_at", ""))[11:23]
    return f"{event.get('seq', ''):>6}  {when}  {event.get('type', ''):<28} {ref:<48} {_summary(event)}"


def describe(obj: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """The object (metadata, spec, status) followed by its story."""
    meta = obj.get("metadata") or {}
    lines = [f"Name:         {meta.get('name')}", f"Namespace:    {meta.get('namespace', '')}"]
    lines += [f"Kind:         {obj.get('kind')}", f"UID:          {meta.get('uid')}"]
    for title, part in (("Labels", meta.get("labels")), ("Annotations", meta.get("annotations"))):
        if part:
            lines.append(f"{title}:")
            lines += [f"  {k}={v}" for k, v in part.items()]
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    lines.append("Spec:")
    lines += ["  " + line for line in yaml.safe_dump(body, sort_keys=False).splitlines()]
    conditions = (obj.get("status") or {}).get("conditions") or []
    lines.append("Conditions:")
    lines += [
        f"  {c.get('type'):<20} {c.get('status'):<6} {c.get('reason') or '':<24} {c.get('message') or ''}"
        for c in conditions
    ] or ["  <none>"]
    lines.append("Events:")
    lines += ["  " + event_line(e) for e in events] or ["  <none>"]
    return "\n".join(lines)
