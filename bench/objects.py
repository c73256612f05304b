"""Stored API objects as the core's state machines see them, built directly for the benchmarks that drive the
core without admission."""

from __future__ import annotations

from typing import Any

from libs.core.scheduling.objects import ApiObject


def api_object(
    kind: str,
    name: str,
    *,
    namespace: str = "",
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    created_at: float = 0.0,
) -> ApiObject:
    """An object at resourceVersion 1 whose uid is its kind, namespace and name."""
    return ApiObject(
        kind=kind,
        namespace=namespace,
        name=name,
        uid=f"{kind}/{namespace}/{name}",
        metadata={"name": name, "labels": labels or {}},
        spec=spec or {},
        status=status or {},
        created_at=created_at,
        resource_version=1,
    )
