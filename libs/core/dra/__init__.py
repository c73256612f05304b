"""Pure DRA logic: which DeviceClasses a published device belongs to (CEL selectors), and how many devices
of each class a pod's claims and extended resources ask for."""

from .catalog import DeviceCatalog, DeviceClassInfo
from .requests import claim_devices, extended_resource_devices

__all__ = ["DeviceCatalog", "DeviceClassInfo", "claim_devices", "extended_resource_devices"]
