"""A ResourceClaim's device requests as the allocator reads them: requests (`exactly` or `firstAvailable`
alternatives, each of one class with selectors, a count or All, and capacity to consume) and the
constraints across them (`matchAttribute`, `distinctAttribute`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from libs.api.quantity import QuantityError

from .capacity import milli_units

ALL = "All"


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """One way to satisfy a request: devices of one class passing the selectors, `count` of them or
    every one the node reaches (`all_devices`), each consuming `capacity` (milli-units by the name given,
    qualified later with the device's driver) when it is shareable."""

    name: str
    """The request's name, or `request/sub-request` for a `firstAvailable` alternative."""
    device_class: str
    selectors: tuple[str, ...] = ()
    count: int = 1
    all_devices: bool = False
    capacity: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """A named request: its alternatives in order (one for `exactly`)."""

    name: str
    alternatives: tuple[DeviceAsk, ...]


@dataclass(frozen=True, slots=True)
class ClaimConstraint:
    """The devices of `requests` (every request of the claim when empty) share the attribute
    (`match=True`) or all differ in it; the attribute name is qualified (`gpu.example.com/numaNode`)."""

    requests: tuple[str, ...]
    attribute: str
    match: bool

    def covers(self, ask: DeviceAsk) -> bool:
        if not self.requests:
            return True
        parent = ask.name.partition("/")[0]
        return ask.name in self.requests or parent in self.requests


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """What one claim asks for; `key` names the claim (`namespace/name`, or a placeholder before it
    exists). A claim the pod names (`resourceClaimName`) carries that name in `resource_claim`; once it is
    allocated, `allocated` lists its devices (ids) and it asks for nothing more: a pod sharing it may only
    go where those devices are reached."""

    key: str
    requests: tuple[ClaimRequest, ...]
    constraints: tuple[ClaimConstraint, ...] = ()
    resource_claim: str = ""
    allocated: tuple[str, ...] = ()


def claim_spec(key: str, spec: Mapping[str, Any], *, resource_claim: str = "") -> ClaimSpec:
    """A claim's `spec` (`{devices: {requests, constraints}}`) as the allocator reads it."""
    devices = spec.get("devices") or {}
    requests = tuple(_request(raw) for raw in devices.get("requests") or ())
    constraints: list[ClaimConstraint] = []
    for raw in devices.get("constraints") or ():
        names = tuple(str(name) for name in raw.get("requests") or ())
        if raw.get("matchAttribute"):
            constraints.append(ClaimConstraint(names, str(raw["matchAttribute"]), True))
        if raw.get("distinctAttribute"):
            constraints.append(ClaimConstraint(names, str(raw["distinctAttribute"]), False))
    return ClaimSpec(key, requests, tuple(constraints), resource_claim)


def _request(raw: Mapping[str, Any]) -> ClaimRequest:
    name = str(raw.get("name") or "")
    if raw.get("firstAvailable"):
        return ClaimRequest(
            name,
            tuple(_ask(f"{name}/{sub.get('name') or ''}", sub) for sub in raw["firstAvailable"]),
        )
    return ClaimRequest(name, (_ask(name, raw.get("exactly") or {}),))


def _ask(name: str, raw: Mapping[str, Any]) -> DeviceAsk:
    selectors = tuple(
        str((selector.get("cel") or {}).get("expression") or "") for selector in raw.get("selectors") or ()
    )
    capacity: list[tuple[str, int]] = []
    for key, quantity in sorted(((raw.get("capacity") or {}).get("requests") or {}).items()):
        try:
            capacity.append((str(key), milli_units(quantity)))
        except QuantityError:
            continue
    all_devices = raw.get("allocationMode") == ALL
    return DeviceAsk(
        name,
        str(raw.get("deviceClassName") or ""),
        selectors,
        0 if all_devices else int(raw.get("count") or 1),
        all_devices,
        tuple(capacity),
    )
