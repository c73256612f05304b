"""Pure DRA logic: the devices ResourceSlices publish and which DeviceClasses they belong to (CEL
selectors), what claims ask for, the allocation search, and consumable capacity of shareable devices."""

from .allocator import ClaimAllocation, DeviceResult, DeviceUsage, allocate, allocate_for_group
from .catalog import DeviceCatalog, DeviceClassInfo
from .claims import ClaimConstraint, ClaimRequest, ClaimSpec, DeviceAsk, claim_spec
from .devices import DeviceInfo, DeviceInventory
from .requests import claim_devices, extended_resource_devices

__all__ = [
    "ClaimAllocation",
    "ClaimConstraint",
    "ClaimRequest",
    "ClaimSpec",
    "DeviceAsk",
    "DeviceCatalog",
    "DeviceClassInfo",
    "DeviceInfo",
    "DeviceInventory",
    "DeviceResult",
    "DeviceUsage",
    "allocate",
    "allocate_for_group",
    "claim_devices",
    "claim_spec",
    "extended_resource_devices",
]
