"""Allocations as they are written down (a PodGroup's `status.proposal` and `status.placement`, events,
ResourceClaim `status.allocation`) and read back, and the deterministic names of the claims made from
templates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .allocator import ClaimAllocation, DeviceResult
from .capacity import format_milli, milli_units
from .devices import DeviceInventory


def resource_claim_name(owner: str, claim: str) -> str:
    """The ResourceClaim made from a template for a pod or PodGroup: `<owner>-<claim name in its spec>`."""
    return f"{owner}-{claim}"


def allocation_record(allocation: ClaimAllocation, claim_name: str) -> dict[str, Any]:
    """`{name, resourceClaimName, devices: [{request, driver, pool, device, consumedCapacity?}], shared?}`;
    `shared` marks an existing ResourceClaim the pod names (no devices: it was allocated before)."""
    devices: list[dict[str, Any]] = []
    for result in allocation.results:
        device = result.device
        entry: dict[str, Any] = {
            "request": result.request,
            "driver": device.driver,
            "pool": device.pool,
            "device": device.name,
        }
        if result.consumed is not None:
            entry["consumedCapacity"] = {
                name: format_milli(amount) for name, amount in result.consumed.items()
            }
        devices.append(entry)
    record: dict[str, Any] = {"name": allocation.claim, "resourceClaimName": claim_name, "devices": devices}
    if allocation.resource_claim:
        record["shared"] = True
    return record


def allocation_from_record(
    record: Mapping[str, Any], inventory: DeviceInventory, *, key: str | None = None
) -> ClaimAllocation | None:
    """An allocation read back against the inventory; None when one of its devices is no longer published."""
    results: list[DeviceResult] = []
    for entry in record.get("devices") or ():
        device = inventory.device(f"{entry.get('driver')}/{entry.get('pool')}/{entry.get('device')}")
        if device is None:
            return None
        raw = entry.get("consumedCapacity")
        consumed = (
            {str(name): milli_units(amount) for name, amount in raw.items()}
            if isinstance(raw, Mapping)
            else None
        )
        if consumed is None and device.shared:
            consumed = {}
        results.append(DeviceResult(str(entry.get("request") or ""), device, consumed))
    name = key if key is not None else str(record.get("resourceClaimName") or record.get("name") or "")
    shared = str(record.get("resourceClaimName") or "") if record.get("shared") else ""
    return ClaimAllocation(name, tuple(results), None, shared)
