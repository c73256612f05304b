"""How objects are shown in listings, the same for `podway get` and the Kubernetes API's Tables: an age as
kubectl prints it and the condition that says why a pod or a gang waits."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

WAITING_CONDITIONS = (
    "PodScheduled",
    "PodGroupScheduled",
    "PodGroupInitiallyScheduled",
    "CompositePodGroupInitiallyScheduled",
)


def age(created: str | None, now: datetime) -> str:
    """kubectl's short age: 45s, 12m, 3h, 2d."""
    then = _created(created) if created else None
    if then is None:
        return "<unknown>"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@lru_cache(maxsize=4096)
def _created(created: str) -> datetime | None:
    """A creation time as written (a list's objects share few: those created in the same second)."""
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None


def waiting_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The False PodScheduled / PodGroupScheduled condition of a pending pod or PodGroup, or None."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") in WAITING_CONDITIONS and condition.get("status") == "False":
            return dict(condition)
    return None
