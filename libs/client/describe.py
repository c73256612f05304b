"""`podway describe` pages and one-line renderings of audit-log events."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any


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


def describe(obj: dict[str, Any], events: list[dict[str, Any]], extra: list[str] | None = None) -> str:
    """The object (metadata, spec, status), what it holds (a claim's allocation and reservations; `extra`
    lines such as a node's devices), then its story."""
    import yaml

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
    if obj.get("kind") == "ResourceClaim":
        lines += claim_lines(obj)
    if obj.get("kind") == "Node":
        lines.append("Taints:       " + (", ".join(node_taints(obj)) or "<none>"))
    if obj.get("kind") in QUEUE_KINDS:
        lines += queue_lines(obj)
    lines += process_lines(obj)
    lines += extra or []
    lines.append("Events:")
    lines += ["  " + event_line(e) for e in events] or ["  <none>"]
    return "\n".join(lines)


QUEUE_KINDS = ("ClusterQueue", "LocalQueue", "Cohort")


def queue_lines(queue: dict[str, Any]) -> list[str]:
    """A Kueue queue's status: its workloads pending, reserving and admitted, its weighted share, and what
    it uses per flavor and resource (a ClusterQueue's beside its nominal quota, with what it borrows)."""
    status = queue.get("status") or {}
    lines = []
    if queue.get("kind") != "Cohort":
        counts = [f"{status.get(f'{c}Workloads') or 0} {c}" for c in ("pending", "reserving", "admitted")]
        lines.append("Workloads:    " + ", ".join(counts))
    if "fairSharing" in status:
        lines.append(f"Weighted Share: {(status.get('fairSharing') or {}).get('weightedShare', 0)}")
    if queue.get("kind") == "Cohort":
        return lines
    cluster_queue = queue.get("kind") == "ClusterQueue"
    nominal = _nominal_quotas(queue) if cluster_queue else {}
    rows = [
        ["FLAVOR", "RESOURCE", "NOMINAL", "TOTAL", "BORROWED"]
        if cluster_queue
        else ["FLAVOR", "RESOURCE", "TOTAL"]
    ]
    for flavor in status.get("flavorsUsage") or []:
        for used in flavor.get("resources") or []:
            key = (str(flavor.get("name")), str(used.get("name")))
            total = str(used.get("total", "0"))
            if cluster_queue:
                rows.append([*key, nominal.get(key, "-"), total, str(used.get("borrowed", "0"))])
            else:
                rows.append([*key, total])
    lines.append("Usage:")
    if len(rows) == 1:
        return [*lines, "  <none>"]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += [
        "  " + "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return lines


def _nominal_quotas(queue: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (str(flavor.get("name")), str(quota.get("name"))): str(quota.get("nominalQuota", "0"))
        for group in (queue.get("spec") or {}).get("resourceGroups") or []
        for flavor in group.get("flavors") or []
        for quota in flavor.get("resources") or []
    }


def process_lines(obj: dict[str, Any]) -> list[str]:
    """A pod run by the process runtime: its address, where its logs are, each container's state, and that
    its image was recorded but not pulled."""
    status = obj.get("status") or {}
    runtime = status.get("podwayRuntime")
    if obj.get("kind") != "Pod" or not runtime:
        return []
    lines = [
        "Runtime:      process (images are recorded, not pulled: containers run as processes on the host)",
        f"IP:           {status.get('podIP', '')}",
        f"Logs:         {runtime.get('logDir', '')}",
        "Containers:",
    ]
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        (state, detail), *_ = (container.get("state") or {"waiting": {}}).items()
        said = ", ".join(f"{k}={v}" for k, v in detail.items() if k in ("reason", "exitCode", "message"))
        lines.append(
            f"  {container.get('name')}: image {container.get('image')} (not pulled), {state}"
            f"{' (' + said + ')' if said else ''}, restarts {container.get('restartCount', 0)}"
        )
    return lines


UNREACHABLE = "node.kubernetes.io/unreachable:NoSchedule"
"""The scheduling core's UNREACHABLE_TAINT; not imported: the CLI's read path stays free of the core."""


def node_taints(node: dict[str, Any]) -> list[str]:
    """`key[=value]:effect` of the node's taints, with the unreachable taint a node not Ready carries (the
    scheduler taints it while its Ready condition is Unknown)."""
    taints = [
        f"{t.get('key')}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect')}"
        for t in (node.get("spec") or {}).get("taints") or []
    ]
    ready = next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None
    )
    if ready is not None and ready.get("status") == "Unknown" and UNREACHABLE not in taints:
        taints.append(UNREACHABLE)
    return taints


def claim_lines(claim: dict[str, Any]) -> list[str]:
    """A ResourceClaim's allocation (each device, with the capacity a share consumes) and who reserves it."""
    status = claim.get("status") or {}
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    lines = ["Allocation:"]
    if not results:
        lines.append("  <none>")
    for result in results:
        consumed = result.get("consumedCapacity")
        share = " (shared: " + ", ".join(f"{k}={v}" for k, v in consumed.items()) + ")" if consumed else ""
        lines.append(
            f"  {result.get('request'):<16} {result.get('driver')}/{result.get('pool')}/{result.get('device')}{share}"
        )
    if allocation.get("allocationTimestamp"):
        lines.append(f"  allocated at {allocation['allocationTimestamp']}")
    lines.append("Reserved For:")
    reserved = status.get("reservedFor") or []
    lines += [f"  {r.get('resource')}/{r.get('name')} ({r.get('uid')})" for r in reserved] or ["  <none>"]
    return lines


def node_device_lines(
    node: dict[str, Any], slices: list[dict[str, Any]], claims: list[dict[str, Any]]
) -> list[str]:
    """A node's devices (its own slices, and those a node selector or all nodes reach), the claim holding
    each, and how much of a shareable device's capacity its shares take, as `kubectl describe node` lists
    allocated resources."""
    name = (node.get("metadata") or {}).get("name")
    labels = (node.get("metadata") or {}).get("labels") or {}
    holders: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        ) or []
        for result in results:
            device = f"{result.get('driver')}/{result.get('pool')}/{result.get('device')}"
            holders.setdefault(device, []).append(
                (f"{meta.get('namespace')}/{meta.get('name')}", result.get("consumedCapacity") or {})
            )
    lines = ["Devices:"]
    for slice_ in sorted(slices, key=lambda item: str((item.get("metadata") or {}).get("name"))):
        spec = slice_.get("spec") or {}
        if not _reaches(spec, str(name), labels):
            continue
        driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name")
        for device in spec.get("devices") or []:
            key = f"{driver}/{pool}/{device.get('name')}"
            held = holders.get(key, [])
            lines.append(f"  {key:<56} {_held(device, held)}")
    if len(lines) == 1:
        lines.append("  <none>")
    return lines


def _reaches(spec: dict[str, Any], node: str, labels: dict[str, str]) -> bool:
    if spec.get("nodeName"):
        return bool(spec["nodeName"] == node)
    if spec.get("nodeSelector"):
        from libs.api.models.core import NodeSelector  # pydantic: loaded only for a node's devices

        return NodeSelector.model_validate(spec["nodeSelector"]).matches(node, labels)
    return bool(spec.get("allNodes"))


def _held(device: dict[str, Any], held: list[tuple[str, dict[str, Any]]]) -> str:
    if not held:
        return "free"
    claims = ", ".join(claim for claim, _ in held)
    if not device.get("allowMultipleAllocations"):
        return claims
    from libs.api.quantity import parse_quantity

    used: list[str] = []
    for capacity, value in (device.get("capacity") or {}).items():
        total = parse_quantity(str(value.get("value")))
        taken = sum(
            (
                parse_quantity(str(amount))
                for _, consumed in held
                for name, amount in consumed.items()
                if name.rpartition("/")[2] == capacity
            ),
            Decimal(0),
        )
        share = int(taken * 100 / total) if total else 0
        used.append(
            f"{capacity} {_in_unit_of(taken, str(value.get('value')))}/{value.get('value')} ({share}%)"
        )
    return f"{claims} [{'; '.join(used)}]" if used else claims


def _in_unit_of(amount: Decimal, total: str) -> str:
    """`amount` in the binary unit `total` is written in (40Gi of 141Gi), else as a plain number."""
    for suffix, power in (("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40)):
        if total.endswith(suffix):
            return f"{(amount / Decimal(2**power)).normalize():f}{suffix}"
    return f"{amount.normalize():f}"
