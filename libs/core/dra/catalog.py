"""DeviceClasses and the published devices that belong to each, decided by the classes' CEL selectors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from libs.api.device_selectors import SelectorError, compile_selector, device_for_cel, evaluate_selector
from libs.api.models.resource import Device


@dataclass(frozen=True, slots=True)
class DeviceClassInfo:
    """A DeviceClass: the CEL selectors a device must pass, and the extended resource it serves."""

    name: str
    expressions: tuple[str, ...]
    extended_resource_name: str | None

    @classmethod
    def of(cls, name: str, spec: Mapping[str, Any]) -> DeviceClassInfo:
        """The class named `name` with this `spec` (a DeviceClass manifest's)."""
        selectors = spec.get("selectors") or []
        expressions = tuple(
            str((selector.get("cel") or {}).get("expression") or "") for selector in selectors
        )
        return cls(name, expressions, spec.get("extendedResourceName") or None)


@dataclass(frozen=True, slots=True)
class SliceDevices:
    """The devices one ResourceSlice publishes, with the driver that publishes them."""

    name: str
    driver: str
    devices: tuple[Mapping[str, Any], ...]


@dataclass
class DeviceCatalog:
    """Which DeviceClasses each published device belongs to.

    A selector is evaluated once per class and distinct device description (devices that differ only by
    name share the answer), never once per pod.
    """

    classes: dict[str, DeviceClassInfo] = field(default_factory=dict)
    extended_resources: dict[str, str] = field(default_factory=dict)
    """Extended resource name (`nvidia.com/gpu`) -> the DeviceClass serving it."""
    _answers: dict[tuple[str, str, str], bool] = field(default_factory=dict)

    def put(self, info: DeviceClassInfo) -> bool:
        """Add or replace a class; True when it changed (node device lists must then be rebuilt)."""
        if self.classes.get(info.name) == info:
            return False
        self.classes[info.name] = info
        self._answers = {key: answer for key, answer in self._answers.items() if key[0] != info.name}
        self._index()
        return True

    def remove(self, name: str) -> bool:
        """Forget a class; True when it was known."""
        if self.classes.pop(name, None) is None:
            return False
        self._index()
        return True

    def _index(self) -> None:
        self.extended_resources = {
            info.extended_resource_name: name
            for name, info in sorted(self.classes.items())
            if info.extended_resource_name
        }

    def extended_resource_names(self) -> dict[str, str]:
        """DeviceClass -> its extended resource name, for messages (`Insufficient nvidia.com/gpu`)."""
        return {
            name: info.extended_resource_name
            for name, info in self.classes.items()
            if info.extended_resource_name
        }

    def node_devices(self, slices: Iterable[SliceDevices]) -> dict[str, tuple[str, ...]]:
        """DeviceClass -> names of a node's exclusive devices in it, from the node's own (`nodeName`)
        slices. Shareable devices (`allowMultipleAllocations`) are left out: they are given by consumable
        capacity to claims, never counted whole for extended resources."""
        found: dict[str, list[str]] = {}
        for slice_ in sorted(slices, key=lambda item: item.name):
            for raw in slice_.devices:
                name = raw.get("name")
                if not name or raw.get("allowMultipleAllocations"):
                    continue
                for class_name in self._classes_of(slice_.driver, raw):
                    found.setdefault(class_name, []).append(str(name))
        return {name: tuple(devices) for name, devices in sorted(found.items())}

    def _classes_of(self, driver: str, raw: Mapping[str, Any]) -> list[str]:
        # Devices described alike share an answer; a differently ordered description only misses the cache.
        description = f"{raw.get('attributes')}|{raw.get('capacity')}|{raw.get('allowMultipleAllocations')}"
        matched: list[str] = []
        context: dict[str, Any] | None = None
        for class_name, info in self.classes.items():
            key = (class_name, driver, description)
            answer = self._answers.get(key)
            if answer is None:
                if context is None:
                    context = device_for_cel(driver, Device.model_validate(raw))
                answer = self._answers[key] = _selects(info, context)
            if answer:
                matched.append(class_name)
        return matched


def _selects(info: DeviceClassInfo, device: Mapping[str, Any]) -> bool:
    try:
        return all(evaluate_selector(compile_selector(expression), device) for expression in info.expressions)
    except SelectorError:
        return False  # a selector that cannot be evaluated selects nothing, as in Kubernetes
