"""The node inventory: Nodes, their ResourceSlices and the DeviceClasses, kept in step with the snapshot."""

from __future__ import annotations

from libs.core.dra.catalog import DeviceCatalog, DeviceClassInfo, SliceDevices
from libs.core.dra.devices import DeviceInventory

from .model import Node
from .objects import ApiObject, core_node
from .snapshot import ClusterSnapshot


class NodeInventory:
    """What each node publishes; every change is passed on to the snapshot as an added, updated or removed
    node (with the pods on it kept). The `put_*` and `remove_*` methods return whether anything changed,
    so the caller can wake unschedulable groups."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.catalog = DeviceCatalog()
        self.devices = DeviceInventory()
        """Every published device, for the allocation search of claims (node, selector and all-node reach)."""
        self._nodes: dict[str, ApiObject] = {}
        self._slices: dict[str, ApiObject] = {}
        self._slices_by_node: dict[str, set[str]] = {}
        self._deferred: set[str] | None = None
        self.node_classes: set[str] = set()
        """DeviceClasses with devices on some node (not only reachable from racks or the cluster)."""

    def __len__(self) -> int:
        return len(self._nodes)

    def node(self, name: str) -> ApiObject | None:
        return self._nodes.get(name)

    def slice(self, name: str) -> ApiObject | None:
        return self._slices.get(name)

    def put_device_class(self, obj: ApiObject) -> bool:
        info = DeviceClassInfo.of(obj.name, obj.spec)
        if not self.catalog.put(info):
            return False
        self.devices.put_class(info)
        self._classes_changed()
        return True

    def remove_device_class(self, name: str) -> bool:
        if not self.catalog.remove(name):
            return False
        self.devices.remove_class(name)
        self._classes_changed()
        return True

    def put_node(self, obj: ApiObject) -> bool:
        known = self._nodes.get(obj.name)
        if known is not None and (known.labels, known.spec, known.status) == (
            obj.labels,
            obj.spec,
            obj.status,
        ):
            return False
        self._nodes[obj.name] = obj
        self.devices.put_node(obj.name, obj.labels)
        self._sync(obj.name)
        return True

    def remove_node(self, name: str) -> tuple[str, ...]:
        """Forget a node; the uids of the pods that were on it (they are lost) are returned."""
        self._nodes.pop(name, None)
        self.devices.remove_node(name)
        if name not in self.snapshot:
            return ()
        return tuple(placement.pod_uid for placement in self.snapshot.remove_node(name))

    def put_slice(self, obj: ApiObject) -> bool:
        node_name = obj.spec.get("nodeName")
        known = self._slices.get(obj.name)
        if known is not None and known.spec == obj.spec:
            return False
        if known is not None:
            self._detach(known)
        self._slices[obj.name] = obj
        self.devices.put_slice(obj.name, obj.spec)
        if node_name:
            self._slices_by_node.setdefault(node_name, set()).add(obj.name)
            if node_name in self._nodes:
                self._sync(node_name)
        return True

    def remove_slice(self, name: str) -> bool:
        known = self._slices.pop(name, None)
        if known is None:
            return False
        self.devices.remove_slice(name)
        self._detach(known)
        node_name = known.spec.get("nodeName")
        if node_name in self._nodes:
            self._sync(node_name)
        return True

    def _detach(self, obj: ApiObject) -> None:
        node_name = obj.spec.get("nodeName")
        if node_name:
            self._slices_by_node.get(node_name, set()).discard(obj.name)

    def core_node(self, name: str) -> Node:
        slices = [
            _devices_of(self._slices[slice_name]) for slice_name in sorted(self._slices_by_node.get(name, ()))
        ]
        return core_node(self._nodes[name], self.catalog.node_devices(slices))

    def defer(self) -> None:
        """Collect node changes until `flush` (a bulk load then builds each node once)."""
        self._deferred = set()

    def flush(self) -> None:
        deferred, self._deferred = self._deferred, None
        for name in sorted(deferred or ()):
            if name in self._nodes:
                self._sync(name)
        self.devices.settle()

    def _sync(self, name: str) -> None:
        if self._deferred is not None:
            self._deferred.add(name)
            return
        node = self.core_node(name)
        self.node_classes.update(node.devices)
        if name in self.snapshot:
            self.snapshot.update_node(node)
        else:
            self.snapshot.add_node(node)

    def _classes_changed(self) -> None:
        self.snapshot.extended_resource_names.clear()
        self.snapshot.extended_resource_names.update(self.catalog.extended_resource_names())
        for name in self._nodes:
            self._sync(name)


def _devices_of(slice_: ApiObject) -> SliceDevices:
    return SliceDevices(
        slice_.name, str(slice_.spec.get("driver") or ""), tuple(slice_.spec.get("devices") or ())
    )
