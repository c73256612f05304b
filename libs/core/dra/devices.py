"""The device inventory: every device the ResourceSlices publish, which nodes reach it, which DeviceClasses
it belongs to, and which devices a request may use on a node.

A slice publishes for one node (`nodeName`), for the nodes a `nodeSelector` picks (a rack fabric), or for
all nodes; only the slices of a pool's newest generation count. Selectors are CEL, compiled once per
expression and evaluated once per expression and device description: devices that differ only by name
share the answer, so 40,000 identical GPUs cost one evaluation per selector. A selector that fails at run
time (a missing attribute) selects nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from libs.api.device_selectors import SelectorError, compile_selector, evaluate_selector, selector_context
from libs.api.models.core import NodeSelector
from libs.api.quantity import cel_number

from .capacity import parse_amounts, qualified, request_defaults
from .catalog import DeviceClassInfo


@dataclass(frozen=True, slots=True, eq=False)
class DeviceInfo:
    """One published device (compared by identity: the inventory makes one object per device). `id` is `driver/pool/name`, unique in the cluster; attribute and capacity
    names are qualified with their domain (`gpu.example.com/numaNode`); capacity is in milli-units."""

    id: str
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Any]
    capacity: Mapping[str, int]
    capacity_defaults: Mapping[str, int]
    """What a share consumes of a capacity its request does not name (`requestPolicy.default`)."""
    shared: bool
    node: str | None
    """The node of a `nodeName` slice; None for devices reached through a node selector or from all nodes."""
    description: str
    """Everything CEL sees but the name: equal descriptions give equal selector answers."""
    cel: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class _Reach:
    selector: NodeSelector | None
    """None: every node reaches the devices."""
    devices: tuple[DeviceInfo, ...]


def device_info(
    driver: str,
    pool: str,
    raw: Mapping[str, Any],
    node: str | None,
    parsed: dict[str, tuple[Any, ...]] | None = None,
) -> DeviceInfo:
    """A device as published in a slice (`{name, attributes, capacity, allowMultipleAllocations}`).

    `parsed` caches what devices described alike share (all but the name), so that a fleet of identical
    GPUs is parsed once."""
    name = str(raw.get("name") or "")
    key = f"{driver}|{raw.get('attributes')}|{raw.get('capacity')}|{raw.get('allowMultipleAllocations')}"
    shared_part = parsed.get(key) if parsed is not None else None
    if shared_part is None:
        shared_part = _describe(driver, raw)
        if parsed is not None:
            parsed[key] = shared_part
    attributes, capacity, defaults, shared, description, cel = shared_part
    return DeviceInfo(
        f"{driver}/{pool}/{name}",
        driver,
        pool,
        name,
        attributes,
        capacity,
        defaults,
        shared,
        node,
        description,
        cel,
    )


def _describe(driver: str, raw: Mapping[str, Any]) -> tuple[Any, ...]:
    attributes: dict[str, Any] = {}
    cel_attributes: dict[str, dict[str, Any]] = {driver: {}}
    for key, typed in (raw.get("attributes") or {}).items():
        value = _attribute_value(typed)
        full = qualified(str(key), driver)
        attributes[full] = value
        domain, _, short = full.rpartition("/")
        cel_attributes.setdefault(domain, {})[short] = value
    capacity = parse_amounts(raw.get("capacity") or {}, driver)
    cel_capacity: dict[str, dict[str, Any]] = {driver: {}}
    for key, value in (raw.get("capacity") or {}).items():
        quantity = value.get("value") if isinstance(value, Mapping) else value
        domain, _, short = qualified(str(key), driver).rpartition("/")
        if isinstance(quantity, str | int | float):
            cel_capacity.setdefault(domain, {})[short] = cel_number(quantity)
    shared = bool(raw.get("allowMultipleAllocations"))
    cel = {
        "driver": driver,
        "attributes": cel_attributes,
        "capacity": cel_capacity,
        "allowMultipleAllocations": shared,
    }
    description = f"{driver}|{sorted(attributes.items())}|{sorted(capacity.items())}|{shared}"
    defaults = request_defaults(raw.get("capacity") or {}, driver)
    return attributes, capacity, defaults, shared, description, cel


def _attribute_value(typed: Any) -> Any:
    if not isinstance(typed, Mapping):
        return typed
    for kind in ("int", "bool", "string", "version"):
        if kind in typed and typed[kind] is not None:
            return typed[kind]
    return None


class SelectorAnswers:
    """Answers of CEL selectors per expression and device description, computed on first ask."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str], bool] = {}
        self.evaluations = 0

    def passes(self, device: DeviceInfo, expressions: Iterable[str]) -> bool:
        """Whether the device passes every expression."""
        for expression in expressions:
            key = (expression, device.description)
            answer = self._answers.get(key)
            if answer is None:
                answer = self._answers[key] = self._evaluate(expression, device)
            if not answer:
                return False
        return True

    def _evaluate(self, expression: str, device: DeviceInfo) -> bool:
        self.evaluations += 1
        try:
            return evaluate_selector(compile_selector(expression), selector_context(device.cel))
        except SelectorError:
            return False


class DeviceInventory:
    """Devices by node and by class, from the slices, the nodes' labels and the DeviceClasses.

    `candidates(node, class, selectors)` is what an allocation search walks: the devices of a class that
    pass the selectors and that the node reaches, in a fixed order (the node's own devices by name first,
    then shared-reach devices by id). Answers are cached until the inventory changes (`version`)."""

    def __init__(self) -> None:
        self.classes: dict[str, DeviceClassInfo] = {}
        self.selectors = SelectorAnswers()
        self.version = 0
        self._slices: dict[str, tuple[str, str, int, Mapping[str, Any]]] = {}
        self._pools: dict[tuple[str, str], int] = {}
        self._node_labels: dict[str, Mapping[str, str]] = {}
        self._by_node: dict[str, tuple[DeviceInfo, ...]] = {}
        self._reaches: list[_Reach] = []
        self.devices: dict[str, DeviceInfo] = {}
        self._candidates: dict[tuple[str | None, str, tuple[str, ...]], tuple[DeviceInfo, ...]] = {}
        self._reach_of: dict[str, tuple[DeviceInfo, ...]] = {}
        self._reachers: dict[str, frozenset[str]] = {}
        self._only: dict[str, frozenset[str]] = {}
        self._dirty = False
        self.takes: dict[
            tuple[int, int, int], tuple[object, dict[str, int] | bool | None, object, object]
        ] = {}
        """What an ask consumes of devices with given capacity tables, kept by the allocation search."""

    # -- changes ----------------------------------------------------------------------------------------

    def put_class(self, info: DeviceClassInfo) -> None:
        self.classes[info.name] = info
        self._changed(rebuild=False)

    def remove_class(self, name: str) -> None:
        if self.classes.pop(name, None) is not None:
            self._changed(rebuild=False)

    def put_node(self, name: str, labels: Mapping[str, str]) -> None:
        if self._node_labels.get(name) != labels:
            self._node_labels[name] = dict(labels)
            self._changed(rebuild=False)

    def remove_node(self, name: str) -> None:
        if self._node_labels.pop(name, None) is not None:
            self._changed(rebuild=False)

    def put_slice(self, name: str, spec: Mapping[str, Any]) -> None:
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or name))
        self._slices[name] = (key[0], key[1], int(pool.get("generation") or 0), spec)
        self._changed(rebuild=True)

    def remove_slice(self, name: str) -> None:
        if self._slices.pop(name, None) is not None:
            self._changed(rebuild=True)

    def _changed(self, *, rebuild: bool) -> None:
        self.version += 1
        self._candidates.clear()
        self._reach_of.clear()
        self._reachers.clear()
        self._dirty = self._dirty or rebuild

    def settle(self) -> None:
        """Build the device tables from the slices now (they are otherwise built when next read)."""
        self._settle()

    def _settle(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        newest: dict[tuple[str, str], int] = {}
        for driver, pool, generation, _ in self._slices.values():
            newest[(driver, pool)] = max(generation, newest.get((driver, pool), generation))
        by_node: dict[str, list[DeviceInfo]] = {}
        reaches: list[_Reach] = []
        devices: dict[str, DeviceInfo] = {}
        parsed: dict[str, tuple[Any, ...]] = {}
        for slice_name in sorted(self._slices):
            driver, pool, generation, spec = self._slices[slice_name]
            if generation < newest[(driver, pool)]:
                continue
            node = spec.get("nodeName") or None
            infos = tuple(
                device_info(driver, pool, raw, node, parsed)
                for raw in spec.get("devices") or ()
                if raw.get("name")
            )
            devices.update((info.id, info) for info in infos)
            if node:
                by_node.setdefault(str(node), []).extend(infos)
            elif spec.get("nodeSelector"):
                reaches.append(_Reach(NodeSelector.model_validate(spec["nodeSelector"]), infos))
            elif spec.get("allNodes"):
                reaches.append(_Reach(None, infos))
        self._pools = newest
        self._only.clear()
        self.devices = devices
        self._by_node = {node: tuple(sorted(infos, key=_by_name)) for node, infos in by_node.items()}
        self._reaches = reaches

    # -- reading ----------------------------------------------------------------------------------------

    def device(self, device_id: str) -> DeviceInfo | None:
        self._settle()
        return self.devices.get(device_id)

    def node_devices(self, node: str) -> tuple[DeviceInfo, ...]:
        """Devices published for the node itself (`nodeName` slices)."""
        self._settle()
        return self._by_node.get(node, ())

    def reachable(self, node: str | None) -> tuple[DeviceInfo, ...]:
        """Every device the node reaches: its own, then those of slices whose selector picks it (or all
        nodes). `None` stands for no node in particular: only all-nodes devices."""
        self._settle()
        key = node or ""
        found = self._reach_of.get(key)
        if found is None:
            labels = self._node_labels.get(node, {}) if node else {}
            shared = [
                info
                for reach in self._reaches
                if reach.selector is None or (node is not None and reach.selector.matches(node, labels))
                for info in reach.devices
            ]
            own = self._by_node.get(node, ()) if node else ()
            found = self._reach_of[key] = own + tuple(sorted(shared, key=_by_id))
        return found

    def reaching_nodes(self, device: DeviceInfo) -> frozenset[str] | None:
        """The nodes that reach a device; None when every node does."""
        if device.node is not None:
            return self.only(device.node)
        self._settle()
        cached = self._reachers.get(device.id)
        if cached is not None:
            return cached
        for reach in self._reaches:
            if device in reach.devices:
                if reach.selector is None:
                    return None
                selector = reach.selector
                nodes = frozenset(
                    node for node, labels in self._node_labels.items() if selector.matches(node, labels)
                )
                self._reachers[device.id] = nodes
                return nodes
        return frozenset()

    def only(self, node: str) -> frozenset[str]:
        """One node as a set, the same object each time: allocations of a node's own devices name it, and
        a fleet holds one such allocation per pod."""
        found = self._only.get(node)
        if found is None:
            found = self._only[node] = frozenset((node,))
        return found

    def in_class(self, device: DeviceInfo, class_name: str) -> bool:
        """Whether a device belongs to a class (passes its selectors); an unknown class has no device."""
        info = self.classes.get(class_name)
        return info is not None and self.selectors.passes(device, info.expressions)

    def candidates(
        self, node: str | None, class_name: str, selectors: tuple[str, ...]
    ) -> tuple[DeviceInfo, ...]:
        """Devices the node reaches that belong to the class and pass the request's selectors."""
        key = (node, class_name, selectors)
        found = self._candidates.get(key)
        if found is None:
            info = self.classes.get(class_name)
            if info is None:
                found = ()
            else:
                passes = self.selectors.passes
                expressions = info.expressions + selectors
                found = tuple(device for device in self.reachable(node) if passes(device, expressions))
            self._candidates[key] = found
        return found


def _by_name(device: DeviceInfo) -> tuple[int, str, str]:
    # gpu-2 before gpu-10: names sort by length first, the way drivers number them.
    return (len(device.name), device.name, device.id)


def _by_id(device: DeviceInfo) -> str:
    return device.id
