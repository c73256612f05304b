"""How the CLI prints objects: kubectl-like tables, YAML, JSON `List`s, and `describe` pages."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from libs.api.display import age, waiting_condition

KIND_ALIASES: dict[str, str] = {}
for _kind, _names in {
    "PodGroup": ("podgroup", "podgroups", "pg"),
    "CompositePodGroup": ("compositepodgroup", "compositepodgroups", "cpg"),
    "Pod": ("pod", "pods", "po"),
    "Workload": ("workload", "workloads", "wl"),
    "Job": ("job", "jobs"),
    "Node": ("node", "nodes", "no"),
    "Namespace": ("namespace", "namespaces", "ns"),
    "PriorityClass": ("priorityclass", "priorityclasses", "pc"),
    "DeviceClass": ("deviceclass", "deviceclasses"),
    "ResourceClaim": ("resourceclaim", "resourceclaims"),
    "ResourceClaimTemplate": ("resourceclaimtemplate", "resourceclaimtemplates"),
    "ResourceSlice": ("resourceslice", "resourceslices"),
    "ResourceFlavor": ("resourceflavor", "resourceflavors", "flavor", "flavors", "rf"),
    "Cohort": ("cohort", "cohorts"),
    "ClusterQueue": ("clusterqueue", "clusterqueues", "cq"),
    "LocalQueue": ("localqueue", "localqueues", "queue", "queues", "lq"),
}.items():
    for _name in (*_names, _kind.lower()):
        KIND_ALIASES[_name] = _kind


def resolve_kind(text: str) -> str:
    """`podgroups`, `pg` or `PodGroup` -> `PodGroup`; unknown names raise ValueError in kubectl's words."""
    kind = KIND_ALIASES.get(text.lower())
    if kind is None:
        raise ValueError(f'the server doesn\'t have a resource type "{text}"')
    return kind


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return meta


def _policy(spec: dict[str, Any]) -> tuple[str, str]:
    policy = spec.get("schedulingPolicy") or {}
    if "gang" in policy and policy["gang"] is not None:
        return "gang", str((policy["gang"] or {}).get("minCount", ""))
    return "basic", "-"


def _podgroup_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    kind, min_count = _policy(spec)
    raw = status.get("podway")
    summary: dict[str, Any] = raw if isinstance(raw, dict) else {}
    placed = summary.get("placed", 0)
    return [
        summary.get("phase") or "Pending",
        kind,
        f"{placed}/{min_count}" if kind == "gang" else str(placed),
        str(spec.get("priority", 0)),
        summary.get("domain") or "-",
    ]


def _composite_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    raw = (obj.get("status") or {}).get("podway")
    summary: dict[str, Any] = raw if isinstance(raw, dict) else {}
    gang = (spec.get("schedulingPolicy") or {}).get("gang")
    needed = gang.get("minGroupCount") if isinstance(gang, dict) else None
    scheduled = summary.get("scheduled", 0)
    return [
        summary.get("phase") or "Pending",
        "gang" if needed else "basic",
        f"{scheduled}/{needed}" if needed else str(scheduled),
        str(spec.get("priority", 0)),
        summary.get("domain") or "-",
    ]


def _pod_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    group = (spec.get("schedulingGroup") or {}).get("podGroupName") or "-"
    return [status.get("phase") or "Pending", group, spec.get("nodeName") or "<none>"]


def _workload_row(obj: dict[str, Any]) -> list[str]:
    templates = (obj.get("spec") or {}).get("podGroupTemplates") or []
    return [",".join(f"{t.get('name')}({_policy(t)[0]})" for t in templates)]


def _job_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    completions = f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}"
    return [completions, str(spec.get("parallelism", 1)), spec.get("completionMode", "NonIndexed")]


def _node_row(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    labels = _meta(obj).get("labels") or {}
    state = "Ready,SchedulingDisabled" if spec.get("unschedulable") else "Ready"
    return [state, labels.get("topology.example.com/rack", "-")]


def _claim_row(obj: dict[str, Any]) -> list[str]:
    status = obj.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    reserved = status.get("reservedFor") or []
    state = "allocated,reserved" if results and reserved else "allocated" if results else "pending"
    devices = ",".join(f"{r.get('pool')}/{r.get('device')}" for r in results) or "-"
    return [state, devices, ",".join(str(r.get("name")) for r in reserved) or "-"]


def _queue_row(pointer: str) -> Callable[[dict[str, Any]], list[str]]:
    """A ClusterQueue's cohort or a LocalQueue's ClusterQueue, then Kueue's pending and admitted counts."""

    def row(obj: dict[str, Any]) -> list[str]:
        status = obj.get("status") or {}
        counts = [str(status.get("pendingWorkloads") or 0), str(status.get("admittedWorkloads") or 0)]
        return [(obj.get("spec") or {}).get(pointer) or "-", *counts]

    return row


def _weighted_share(obj: dict[str, Any]) -> list[str]:
    """Kueue's fair-sharing share (`status.fairSharing.weightedShare`)."""
    return [str(((obj.get("status") or {}).get("fairSharing") or {}).get("weightedShare", 0))]


def _cohort_row(obj: dict[str, Any]) -> list[str]:
    return [(obj.get("spec") or {}).get("parentName") or "-", *_weighted_share(obj)]


COLUMNS: dict[str, tuple[list[str], Callable[[dict[str, Any]], list[str]]]] = {
    "ResourceClaim": (["STATE", "DEVICES", "RESERVED FOR"], _claim_row),
    "PodGroup": (["PHASE", "POLICY", "PLACED", "PRIORITY", "DOMAIN"], _podgroup_row),
    "CompositePodGroup": (["PHASE", "POLICY", "GROUPS", "PRIORITY", "DOMAIN"], _composite_row),
    "Pod": (["STATUS", "PODGROUP", "NODE"], _pod_row),
    "Workload": (["TEMPLATES"], _workload_row),
    "Job": (["COMPLETIONS", "PARALLELISM", "MODE"], _job_row),
    "Node": (["STATUS", "RACK"], _node_row),
    "Namespace": (["STATUS"], lambda ns: [str((ns.get("status") or {}).get("phase", "Active"))]),
    "ClusterQueue": (["COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS"], _queue_row("cohortName")),
    "LocalQueue": (["CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"], _queue_row("clusterQueue")),
    "Cohort": (["PARENT", "WEIGHTED SHARE"], _cohort_row),
}


def waiting(obj: dict[str, Any]) -> str:
    """Why a pending pod or PodGroup waits (`Reason: message` of its PodScheduled / PodGroupScheduled
    condition when False), or `-`."""
    condition = waiting_condition(obj)
    return f"{condition.get('reason')}: {condition.get('message')}" if condition else "-"


WIDE_COLUMNS: dict[str, tuple[list[str], Callable[[dict[str, Any]], list[str]]]] = {
    "PodGroup": (["WAITING"], lambda obj: [waiting(obj)]),
    "CompositePodGroup": (["WAITING"], lambda obj: [waiting(obj)]),
    "Pod": (["WAITING"], lambda obj: [waiting(obj)]),
    "ClusterQueue": (["WEIGHTED SHARE"], _weighted_share),
}


def table_rows(
    kind: str, items: Sequence[dict[str, Any]], *, wide: bool, all_namespaces: bool
) -> list[list[str]]:
    """The header, then one row per object."""
    now = datetime.now(UTC)
    header, row_of = COLUMNS.get(kind, ([], lambda _o: []))
    wide_header, wide_of = WIDE_COLUMNS.get(kind, ([], lambda _o: []))
    head = (["NAMESPACE"] if all_namespaces else []) + ["NAME", *header, "AGE"]
    head += [*wide_header, "UID"] if wide else []
    rows = [head]
    for obj in items:
        meta = _meta(obj)
        row = ([meta.get("namespace") or ""] if all_namespaces else []) + [meta.get("name", "")]
        row += row_of(obj) + [age(meta.get("creationTimestamp"), now)]
        rows.append(row + ([*wide_of(obj), meta.get("uid", "")] if wide else []))
    return rows


def aligned(rows: Sequence[Sequence[str]], widths: Sequence[int]) -> list[str]:
    return ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def table(kind: str, items: Sequence[dict[str, Any]], *, wide: bool, all_namespaces: bool) -> str:
    """A kubectl-like table; `wide` adds why pending pods and PodGroups wait, and the uid."""
    rows = table_rows(kind, items, wide=wide, all_namespaces=all_namespaces)
    if len(rows) == 1:
        return "No resources found."
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(aligned(rows, widths))


def as_list(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """kubectl's `-o json` for many objects: a `List`."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {"resourceVersion": ""}}


def render(kind: str, items: Sequence[dict[str, Any]], output: str, *, all_namespaces: bool = False) -> str:
    if output == "json":
        return json.dumps(as_list(items), indent=2)
    if output == "yaml":
        import yaml

        return yaml.safe_dump(as_list(items), sort_keys=False)
    return table(kind, items, wide=output == "wide", all_namespaces=all_namespaces)


def _version(obj: dict[str, Any]) -> str:
    """What changes when an object does: its resourceVersion and status (conditions are folded into
    status by the query, and pods' phases live there)."""
    meta = _meta(obj)
    return json.dumps([meta.get("resourceVersion"), obj.get("status")], sort_keys=True, default=str)


class WatchPrinter:
    """`get -w` output: the table (or documents) first, then each object again when it changed, kubectl's
    way: rows aligned to the first table's columns, or one JSON / YAML document per change."""

    def __init__(self, kind: str, output: str, *, all_namespaces: bool, out: Callable[[str], None] = print):
        self.kind, self.output, self.all_namespaces, self.out = kind, output, all_namespaces, out
        self.seen: dict[str, str] = {}
        self.widths: list[int] = []

    def first(self, items: Sequence[dict[str, Any]]) -> None:
        rows = self._rows(items)
        self.widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        if self.output in ("json", "yaml"):
            self._documents(items)
        else:
            self._print(aligned(rows, self.widths))
        self._remember(items)

    def changed(self, items: Sequence[dict[str, Any]]) -> None:
        fresh = [obj for obj in items if self.seen.get(self._key(obj)) != _version(obj)]
        if not fresh:
            return
        if self.output in ("json", "yaml"):
            self._documents(fresh)
        else:
            rows = self._rows(fresh)[1:]
            self.widths = [max(w, *(len(r[i]) for r in rows)) for i, w in enumerate(self.widths)]
            self._print(aligned(rows, self.widths))
        self._remember(fresh)

    def _rows(self, items: Sequence[dict[str, Any]]) -> list[list[str]]:
        wide = self.output == "wide"
        return table_rows(self.kind, items, wide=wide, all_namespaces=self.all_namespaces)

    def _documents(self, items: Sequence[dict[str, Any]]) -> None:
        for obj in items:
            if self.output == "json":
                self._print([json.dumps(obj, indent=2)])
            else:
                import yaml

                self._print(["---", yaml.safe_dump(obj, sort_keys=False).rstrip()])

    def _remember(self, items: Sequence[dict[str, Any]]) -> None:
        for obj in items:
            self.seen[self._key(obj)] = _version(obj)

    @staticmethod
    def _key(obj: dict[str, Any]) -> str:
        meta = _meta(obj)
        return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")

    def _print(self, lines: list[str]) -> None:
        for line in lines:
            self.out(line)
        import sys

        sys.stdout.flush()
