"""Devices: none held by two claims in use beyond what it can share, and no node's devices promised to more
pods than it has.

A claim is in use while a pod it is reserved for is bound or running, or a PodGroup it is reserved for has
such a pod; a released claim keeps no allocation. A claim's devices are those its status names
(`status.allocation.devices.results`) and those the DRA allocator's rows say it holds."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from libs.api.quantity import QuantityError, value
from libs.core.dra.capacity import milli_units, parse_amounts
from libs.core.dra.catalog import DeviceCatalog, DeviceClassInfo, SliceDevices
from libs.core.scheduling.lifecycle import PodPhase
from libs.core.scheduling.objects import ApiObject, pod_group_name, pod_phase, pod_request

from .records import DeviceAllocationRow, Violation

Holders = Mapping[str, Mapping[str, Mapping[str, int] | None]]
"""Device id -> claim (`namespace/name`) -> what it consumes of a shareable device (None: the whole device)."""


@dataclass(frozen=True, slots=True)
class PublishedDevice:
    node: str | None
    shared: bool
    capacity: Mapping[str, int]
    """Milli-units by qualified capacity name."""


def published_devices(slices: Iterable[ApiObject]) -> dict[str, PublishedDevice]:
    """Every device the ResourceSlices publish, by `driver/pool/device`."""
    found: dict[str, PublishedDevice] = {}
    for piece in slices:
        spec = piece.spec
        driver, pool = str(spec.get("driver")), str((spec.get("pool") or {}).get("name"))
        for raw in spec.get("devices") or []:
            found[f"{driver}/{pool}/{raw.get('name')}"] = PublishedDevice(
                spec.get("nodeName") or None,
                bool(raw.get("allowMultipleAllocations")),
                parse_amounts(raw.get("capacity") or {}, driver),
            )
    return found


def claim_holders(claims: Iterable[ApiObject], rows: Iterable[DeviceAllocationRow]) -> Holders:
    """Who holds each device, from the claims' statuses and the allocator's rows."""
    holders: dict[str, dict[str, Mapping[str, int] | None]] = defaultdict(dict)
    for claim in claims:
        results = ((claim.status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for result in results:
            device = f"{result.get('driver')}/{result.get('pool')}/{result.get('device')}"
            consumed = result.get("consumedCapacity")
            holders[device][claim.key] = (
                {str(name): milli_units(amount) for name, amount in consumed.items()}
                if isinstance(consumed, Mapping)
                else None
            )
    for row in rows:
        holders[row.device].setdefault(row.claim, None if row.exclusive else {})
    return holders


def claims_in_use(
    claims: Iterable[ApiObject],
    pods: Iterable[ApiObject],
    groups: Iterable[ApiObject],
    holds: Mapping[str, str],
) -> frozenset[str]:
    """Claims (`namespace/name`) reserved for a pod that is bound or running, or for a PodGroup with one."""
    group_uid = {(group.namespace, group.name): group.uid for group in groups}
    live: set[str] = set()
    for pod in pods:
        if pod.uid in holds or pod_phase(pod) is PodPhase.RUNNING:
            live.add(pod.uid)
            if (name := pod_group_name(pod)) and (uid := group_uid.get((pod.namespace, name))):
                live.add(uid)
    return frozenset(
        claim.key
        for claim in claims
        if any(str(entry.get("uid")) in live for entry in claim.status.get("reservedFor") or [])
    )


def held_whole(holders: Holders, in_use: frozenset[str]) -> frozenset[str]:
    """Devices a claim in use holds for itself."""
    return frozenset(
        device
        for device, by_claim in holders.items()
        if any(claim in in_use and consumed is None for claim, consumed in by_claim.items())
    )


def device_held_once(
    holders: Holders, devices: Mapping[str, PublishedDevice], in_use: frozenset[str]
) -> list[Violation]:
    """A device is held by one claim in use, or shared by several within each capacity it publishes."""
    found = []
    for device, by_claim in sorted(holders.items()):
        users = {claim: consumed for claim, consumed in by_claim.items() if claim in in_use}
        published = devices.get(device)
        shareable = published is not None and published.shared
        if len(users) > 1 and not shareable:
            found.append(Violation("device-held-once", device, f"held by {', '.join(sorted(users))}"))
        elif shareable and published is not None:
            found += _beyond_capacity(device, users, published)
    return found


def _beyond_capacity(
    device: str, users: Mapping[str, Mapping[str, int] | None], published: PublishedDevice
) -> list[Violation]:
    consumed: Counter[str] = Counter()
    for amounts in users.values():
        consumed.update(amounts or {})
    return [
        Violation(
            "device-held-once",
            device,
            f"{name}: {amount}m consumed by {len(users)} claims, {published.capacity[name]}m published",
        )
        for name, amount in sorted(consumed.items())
        if name in published.capacity and amount > published.capacity[name]
    ]


def node_devices_not_overcommitted(
    nodes: Iterable[ApiObject],
    pods: Iterable[ApiObject],
    holds: Mapping[str, str],
    device_classes: Iterable[ApiObject],
    slices: Sequence[ApiObject],
    held: frozenset[str],
) -> list[Violation]:
    """On each node, the extended resources (`nvidia.com/gpu`) its bound pods request, plus the devices of the
    serving class that claims in use hold there, fit what the node has: its allocatable amount of the resource
    when it advertises one, else the devices of the class its ResourceSlices publish. `held` are the ids of
    devices held whole by claims in use."""
    catalog = DeviceCatalog()
    for declared in device_classes:
        catalog.put(DeviceClassInfo.of(declared.name, declared.spec))
    requested: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in pods:
        if (node := holds.get(pod.uid)) is not None:
            requested[node].update(pod_request(pod, catalog.extended_resources).devices)
    found = []
    for obj in nodes:
        in_class = _class_devices(catalog, [s for s in slices if s.spec.get("nodeName") == obj.name])
        allocatable = obj.status.get("allocatable") or obj.status.get("capacity") or {}
        for device_class, count in sorted(requested[obj.name].items()):
            info = catalog.classes.get(device_class)
            resource = (info.extended_resource_name if info else None) or device_class
            if resource in allocatable:
                room, by_claims = _amount(allocatable[resource]), 0
            else:
                devices = in_class.get(device_class, set())
                room, by_claims = len(devices), len(devices & held)
            if count + by_claims > room:
                detail = f"{resource}: {count} requested, {by_claims} held by claims, {room} on the node"
                found.append(Violation("node-devices-not-overcommitted", obj.name, detail))
    return found


def _class_devices(catalog: DeviceCatalog, slices: Iterable[ApiObject]) -> dict[str, set[str]]:
    """DeviceClass -> ids of the exclusive devices a node's own slices publish in it."""
    found: dict[str, set[str]] = defaultdict(set)
    for piece in slices:
        driver, pool = str(piece.spec.get("driver")), str((piece.spec.get("pool") or {}).get("name"))
        listed = SliceDevices(piece.name, driver, tuple(piece.spec.get("devices") or ()))
        for device_class, names in catalog.node_devices([listed]).items():
            found[device_class].update(f"{driver}/{pool}/{name}" for name in names)
    return found


def _amount(text: object) -> int:
    try:
        return value(str(text))
    except QuantityError:
        return 0
