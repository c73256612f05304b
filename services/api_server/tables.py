"""`Table` answers (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`): the columns `kubectl get` prints,
Podway's own for the kinds it schedules (a PodGroup's phase, placed pods, priority and domain; a pending
pod's reason for waiting)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from libs.api.display import age, waiting_condition
from libs.kubeapi.resources import Resource

TABLE_MEDIA = "application/json;as=Table;v=v1;g=meta.k8s.io"

Row = Callable[[dict[str, Any]], list[Any]]


def wants_table(request: web.Request) -> bool:
    """Whether the client asked for a Table first (kubectl get does; other clients ask for objects)."""
    accept = request.headers.get("Accept") or ""
    first = accept.split(",")[0].replace(" ", "")
    return "as=Table" in first and "g=meta.k8s.io" in first


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def _podway(obj: dict[str, Any]) -> dict[str, Any]:
    return _status(obj).get("podway") or {}


def _waiting(obj: dict[str, Any]) -> str:
    condition = waiting_condition(obj)
    return str(condition.get("reason") or "") if condition else ""


def _pod(obj: dict[str, Any]) -> list[Any]:
    phase = _status(obj).get("phase") or "Pending"
    spec = obj.get("spec") or {}
    group = (spec.get("schedulingGroup") or {}).get("podGroupName") or ""
    return [
        phase,
        spec.get("nodeName") or "<none>",
        group or "<none>",
        _waiting(obj) if phase == "Pending" else "",
    ]


def _podgroup(obj: dict[str, Any]) -> list[Any]:
    podway = _podway(obj)
    placed = f"{podway.get('placed', 0)}/{podway.get('minCount') or podway.get('pods') or 0}"
    priority = (obj.get("spec") or {}).get("priority")
    return [
        podway.get("phase") or "Pending",
        placed,
        priority if priority is not None else "",
        podway.get("domain") or "<none>",
    ]


def _composite(obj: dict[str, Any]) -> list[Any]:
    podway = _podway(obj)
    priority = (obj.get("spec") or {}).get("priority")
    groups = f"{podway.get('scheduled', 0)}/{podway.get('minGroupCount') or podway.get('groups') or 0}"
    return [
        podway.get("phase") or "Pending",
        groups,
        priority if priority is not None else "",
        podway.get("domain") or "<none>",
    ]


def _job(obj: dict[str, Any]) -> list[Any]:
    spec, status = obj.get("spec") or {}, _status(obj)
    completions = spec.get("completions") or 1
    return [f"{status.get('succeeded') or 0}/{completions}", status.get("active") or 0]


def _node(obj: dict[str, Any]) -> list[Any]:
    """Ready unless its Ready condition says otherwise (Podway writes it when a node stops being heard)."""
    ready = next((c for c in _status(obj).get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "NotReady" if ready is not None and ready.get("status") != "True" else "Ready"
    if (obj.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    return [state, _meta(obj).get("labels", {}).get("topology.example.com/rack", "<none>")]


def _claim(obj: dict[str, Any]) -> list[Any]:
    allocated = "allocated" if _status(obj).get("allocation") else "pending"
    reserved = len(_status(obj).get("reservedFor") or [])
    return [allocated + (",reserved" if reserved else "")]


def _cluster_queue(obj: dict[str, Any]) -> list[Any]:
    """Kueue's printer columns (the strategy is kubectl's `-o wide` one there, left out here)."""
    status = _status(obj)
    cohort = (obj.get("spec") or {}).get("cohortName") or ""
    return [cohort, status.get("pendingWorkloads") or 0, status.get("admittedWorkloads") or 0]


def _local_queue(obj: dict[str, Any]) -> list[Any]:
    status = _status(obj)
    queue = (obj.get("spec") or {}).get("clusterQueue") or ""
    return [queue, status.get("pendingWorkloads") or 0, status.get("admittedWorkloads") or 0]


COLUMNS: dict[str, tuple[list[tuple[str, str]], Row]] = {
    "Pod": (
        [("Status", "string"), ("Node", "string"), ("PodGroup", "string"), ("Waiting", "string")],
        _pod,
    ),
    "PodGroup": (
        [("Phase", "string"), ("Placed", "string"), ("Priority", "integer"), ("Domain", "string")],
        _podgroup,
    ),
    "CompositePodGroup": (
        [("Phase", "string"), ("Groups", "string"), ("Priority", "integer"), ("Domain", "string")],
        _composite,
    ),
    "Job": ([("Completions", "string"), ("Active", "integer")], _job),
    "Node": ([("Status", "string"), ("Rack", "string")], _node),
    "ResourceClaim": ([("State", "string")], _claim),
    "Namespace": ([("Status", "string")], lambda obj: [_status(obj).get("phase") or "Active"]),
    "ClusterQueue": (
        [("Cohort", "string"), ("Pending Workloads", "integer"), ("Admitted Workloads", "integer")],
        _cluster_queue,
    ),
    "LocalQueue": (
        [("ClusterQueue", "string"), ("Pending Workloads", "integer"), ("Admitted Workloads", "integer")],
        _local_queue,
    ),
}


def _column(name: str, priority: int = 0, format_: str = "") -> dict[str, Any]:
    return {"name": name, "type": "string", "format": format_, "description": name, "priority": priority}


EVENT_COLUMNS = [
    _column("Last Seen"),
    _column("Type"),
    _column("Reason"),
    _column("Object"),
    _column("Subobject", 1),
    _column("Source", 1),
    _column("Message"),
    _column("First Seen", 1),
    _column("Count", 1),
    _column("Name", 1, "name"),
]
"""Upstream's Event columns (`kubectl get events`; `-o wide` adds those of priority 1)."""


def _event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    """An Event's row as upstream's printer makes it, for core/v1 and events.k8s.io/v1 alike."""
    first = event.get("firstTimestamp") or event.get("deprecatedFirstTimestamp") or event.get("eventTime")
    last = event.get("lastTimestamp") or event.get("deprecatedLastTimestamp") or first
    involved = event.get("involvedObject") or event.get("regarding") or {}
    kind, name = str(involved.get("kind") or "").lower(), involved.get("name")
    source = event.get("source") or event.get("deprecatedSource") or {}
    component = source.get("component") or event.get("reportingComponent") or event.get("reportingController")
    instance = source.get("host") or event.get("reportingInstance")
    return [
        age(last, now) if last else "<unknown>",
        event.get("type") or "",
        event.get("reason") or "",
        f"{kind}/{name}" if name else kind,
        involved.get("fieldPath") or "",
        f"{component or ''}, {instance}" if instance else component or "",
        str(event.get("message") or event.get("note") or "").strip(),
        age(first, now) if first else "<unknown>",
        int(event.get("count") or event.get("deprecatedCount") or 1),
        _meta(event).get("name"),
    ]


RowOf = Callable[[str, dict[str, Any], Callable[[dict[str, Any]], list[Any]]], list[Any]]
"""How a list gets an object's cells but its name and age: `(kind, obj, row) -> row(obj)`, or the cells
worked out for it before (see listed.py)."""


def _each_time(kind: str, obj: dict[str, Any], row: Callable[[dict[str, Any]], list[Any]]) -> list[Any]:
    return row(obj)


def table_of(
    resource: Resource,
    items: list[dict[str, Any]],
    revision: int | None,
    token: str | None = None,
    *,
    row_of: RowOf = _each_time,
) -> dict[str, Any]:
    """The Table of these objects, each row carrying its object's metadata (kubectl prints names from it); a
    page of a list carries the `continue` token of the next, as a list of objects does."""
    if resource.kind == "Event":
        return _table(
            EVENT_COLUMNS, [(_event_cells(obj, datetime.now(UTC)), obj) for obj in items], revision, token
        )
    extra, row = COLUMNS.get(resource.kind, ([], lambda _: []))
    kind = resource.kind
    now = datetime.now(UTC)
    definitions = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name of the object",
            "priority": 0,
        },
        *(
            {"name": name, "type": kind, "format": "", "description": name, "priority": 0}
            for name, kind in extra
        ),
        {"name": "Age", "type": "string", "format": "", "description": "Time since creation", "priority": 0},
    ]
    cells = [
        (
            [_meta(obj).get("name"), *row_of(kind, obj, row), age(_meta(obj).get("creationTimestamp"), now)],
            obj,
        )
        for obj in items
    ]
    return _table(definitions, cells, revision, token)


def _table(
    definitions: list[dict[str, Any]],
    cells: list[tuple[list[Any], dict[str, Any]]],
    revision: int | None,
    token: str | None,
) -> dict[str, Any]:
    rows = [
        {
            "cells": row,
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": _meta(obj),
            },
        }
        for row, obj in cells
    ]
    metadata = {"resourceVersion": str(revision)} if revision is not None else {}
    if token:
        metadata["continue"] = token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    }
