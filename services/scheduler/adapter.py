"""API objects as the scheduling core sees them: the one place manifests become core types.

Objects arrive two ways, as stored rows (start-up) and inside `*.admitted` events; both are turned into an
`ApiObject` view first, then mapped here: Nodes and ResourceSlices into `Node` (GPUs are DRA devices, counted
per DeviceClass), Pods into `PodRequest`, PodGroups with their Workload into `PodGroup`.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from libs.api.annotations import (
    effective_annotations,
    gang_restart,
    max_pending_seconds,
    topology_preferred,
)
from libs.api.device_selectors import (
    SelectorError,
    compile_selector,
    device_for_cel,
    evaluate_selector,
)
from libs.api.models.resource import Device
from libs.api.quantity import QuantityError, milli_value, value
from libs.core.scheduling import (
    DEFAULT_SCHEDULER_NAME,
    GangRestartPolicy,
    Node,
    PodGroup,
    PodPhase,
    PodRequest,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyDomainRef,
)
from libs.db.records import StoredObject

Manifest = dict[str, Any]
STANDALONE_PREFIX = "pod/"
"""Name prefix of the one-pod basic group a pod without a PodGroup is scheduled as ('/' is never in a
PodGroup name, so the keys cannot collide)."""


@dataclass(frozen=True, slots=True)
class ApiObject:
    """A stored API object, whether read from the database or carried by an `*.admitted` event."""

    kind: str
    namespace: str
    name: str
    uid: str
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    created_at: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.get("annotations") or {}

    @property
    def labels(self) -> Mapping[str, str]:
        return self.metadata.get("labels") or {}

    @classmethod
    def from_stored(cls, stored: StoredObject) -> ApiObject:
        return cls(
            kind=stored.kind,
            namespace=stored.namespace,
            name=stored.name,
            uid=stored.uid,
            metadata=stored.metadata,
            spec=stored.spec,
            status=stored.status,
            created_at=stored.created_at.timestamp(),
        )

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any], *, uid: str | None = None) -> ApiObject:
        metadata = manifest.get("metadata") or {}
        return cls(
            kind=str(manifest.get("kind", "")),
            namespace=metadata.get("namespace") or "",
            name=metadata.get("name") or "",
            uid=uid or metadata.get("uid") or "",
            metadata=metadata,
            spec=manifest.get("spec") or {},
            status=manifest.get("status") or {},
            created_at=parse_timestamp(metadata.get("creationTimestamp")),
        )


def parse_timestamp(text: str | None) -> float:
    """Unix seconds of an RFC 3339 timestamp (`2026-11-30T12:00:00Z`); 0 when absent or malformed."""
    if not text:
        return 0.0
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


# -- devices --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClassInfo:
    """A DeviceClass: the CEL selectors a device must pass, and the extended resource it serves."""

    name: str
    expressions: tuple[str, ...]
    extended_resource_name: str | None

    @classmethod
    def of(cls, obj: ApiObject) -> DeviceClassInfo:
        selectors = obj.spec.get("selectors") or []
        expressions = tuple(
            str((selector.get("cel") or {}).get("expression") or "") for selector in selectors
        )
        return cls(obj.name, expressions, obj.spec.get("extendedResourceName") or None)


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

    def node_devices(self, slices: Iterable[ApiObject]) -> dict[str, tuple[str, ...]]:
        """DeviceClass -> names of a node's devices in it, from the node's own (`nodeName`) slices."""
        found: dict[str, list[str]] = {}
        for slice_ in sorted(slices, key=lambda item: item.name):
            driver = str(slice_.spec.get("driver") or "")
            for raw in slice_.spec.get("devices") or []:
                name = raw.get("name")
                if not name:
                    continue
                for class_name in self._classes_of(driver, raw):
                    found.setdefault(class_name, []).append(name)
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


# -- nodes ----------------------------------------------------------------------------------------------------


def core_node(node: ApiObject, devices: Mapping[str, tuple[str, ...]]) -> Node:
    """A Node's allocatable resources, labels, taints and cordon, with its devices per DeviceClass."""
    allocatable = node.status.get("allocatable") or node.status.get("capacity") or {}
    return Node(
        name=node.name,
        labels=dict(node.labels),
        cpu_milli=_amount(allocatable.get("cpu"), milli=True),
        memory=_amount(allocatable.get("memory")),
        pods=_amount(allocatable.get("pods"), default=110),
        devices=dict(devices),
        taints=tuple(_taint(raw) for raw in node.spec.get("taints") or []),
        unschedulable=bool(node.spec.get("unschedulable")),
    )


def _taint(raw: Mapping[str, Any]) -> Taint:
    return Taint(str(raw.get("key") or ""), str(raw.get("value") or ""), _effect(raw.get("effect")))


def _effect(text: Any) -> TaintEffect:
    try:
        return TaintEffect(text)
    except ValueError:
        return TaintEffect.NO_SCHEDULE


def _amount(text: Any, *, milli: bool = False, default: int = 0) -> int:
    if text is None or text == "":
        return default
    try:
        return milli_value(text) if milli else value(text)
    except QuantityError:
        return default


# -- pods -----------------------------------------------------------------------------------------------------


def pod_group_name(pod: ApiObject) -> str | None:
    """The PodGroup a pod belongs to (`spec.schedulingGroup.podGroupName`), if any."""
    return (pod.spec.get("schedulingGroup") or {}).get("podGroupName") or None


def pod_phase(pod: ApiObject) -> PodPhase:
    try:
        return PodPhase(pod.status.get("phase") or PodPhase.PENDING)
    except ValueError:
        return PodPhase.UNKNOWN


def pod_has_claims(pod: ApiObject) -> bool:
    return bool(pod.spec.get("resourceClaims"))


def pod_request(
    pod: ApiObject, extended_resources: Mapping[str, str], claim_devices: Mapping[str, int] | None = None
) -> PodRequest:
    """What a pod asks for: the effective request of its containers (max of the init containers' and the
    containers' sum, plus overhead, as kube-scheduler computes it); `nvidia.com/gpu: N` becomes N devices
    of the DeviceClass whose extendedResourceName it is (or of a class named after the resource, which no
    node has, when no class serves it); `claim_devices` (see `claim_devices`) are added."""
    totals = _effective_requests(pod.spec)
    devices: dict[str, int] = dict(claim_devices or {})
    for resource, amount in totals.items():
        if resource in ("cpu", "memory", "ephemeral-storage", "pods") or resource.startswith("hugepages-"):
            continue
        if amount > 0:
            device_class = extended_resources.get(resource, resource)
            devices[device_class] = devices.get(device_class, 0) + amount
    return PodRequest(
        uid=pod.uid,
        name=pod.name,
        cpu_milli=totals.get("cpu", 0),
        memory=totals.get("memory", 0),
        devices=devices,
        node_selector=dict(pod.spec.get("nodeSelector") or {}),
        tolerations=tuple(_toleration(raw) for raw in pod.spec.get("tolerations") or []),
        scheduler_name=pod.spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME,
    )


def claim_devices(
    pod: ApiObject,
    group: ApiObject | None,
    templates: Mapping[str, ApiObject],
    node_classes: Container[str],
) -> dict[str, int]:
    """Whole devices per DeviceClass that a pod's own claims ask for, so that a node without them is not
    chosen: claims made from a ResourceClaimTemplate for this pod alone (a claim equal in name, claim name
    and template name to a PodGroup claim is the group's, shared), `ExactCount` requests of classes whose
    devices sit on nodes. Selectors and constraints are the DRA allocator's to honour."""
    shared = {_claim_identity(claim) for claim in (group.spec.get("resourceClaims") or [] if group else [])}
    wanted: dict[str, int] = {}
    for claim in pod.spec.get("resourceClaims") or []:
        template_name = claim.get("resourceClaimTemplateName")
        if not template_name or _claim_identity(claim) in shared:
            continue
        template = templates.get(f"{pod.namespace}/{template_name}")
        requests = (
            ((template.spec.get("spec") or {}).get("devices") or {}).get("requests") if template else None
        )
        for request in requests or []:
            exactly = request.get("exactly") or {}
            device_class = exactly.get("deviceClassName")
            if (
                isinstance(device_class, str)
                and device_class in node_classes
                and exactly.get("allocationMode", "ExactCount") == "ExactCount"
            ):
                wanted[device_class] = wanted.get(device_class, 0) + int(exactly.get("count") or 1)
    return wanted


def _claim_identity(claim: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return (claim.get("name"), claim.get("resourceClaimName"), claim.get("resourceClaimTemplateName"))


def _effective_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    summed: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for resource, amount in _requests(container).items():
            summed[resource] = summed.get(resource, 0) + amount
    for container in spec.get("initContainers") or []:
        for resource, amount in _requests(container).items():
            summed[resource] = max(summed.get(resource, 0), amount)
    for resource, text in (spec.get("overhead") or {}).items():
        summed[resource] = summed.get(resource, 0) + _amount(text, milli=resource == "cpu")
    return summed


def _requests(container: Mapping[str, Any]) -> dict[str, int]:
    requests = (container.get("resources") or {}).get("requests") or {}
    return {name: _amount(text, milli=name == "cpu") for name, text in requests.items()}


def _toleration(raw: Mapping[str, Any]) -> Toleration:
    operator = TolerationOperator.EXISTS if raw.get("operator") == "Exists" else TolerationOperator.EQUAL
    effect = _effect(raw["effect"]) if raw.get("effect") else None
    return Toleration(str(raw.get("key") or ""), operator, str(raw.get("value") or ""), effect)


def pod_priority(pod: ApiObject) -> int:
    return int(pod.spec.get("priority") or 0)


# -- groups ---------------------------------------------------------------------------------------------------


def podgroup_min_count(group: ApiObject) -> int | None:
    """A gang's minCount, None for a basic group."""
    gang = (group.spec.get("schedulingPolicy") or {}).get("gang")
    if not isinstance(gang, Mapping):
        return None
    return int(gang.get("minCount") or 1)


def podgroup_workload_name(group: ApiObject) -> str | None:
    ref = (group.spec.get("podGroupTemplateRef") or {}).get("workload") or {}
    return ref.get("workloadName") or None


def podgroup_has_claims(group: ApiObject) -> bool:
    return bool(group.spec.get("resourceClaims"))


def assigned_domain(group: ApiObject) -> TopologyDomainRef | None:
    """The domain a scheduled gang was given (`status.placement.domain`), which later pods join."""
    domain = (group.status.get("placement") or {}).get("domain")
    if not isinstance(domain, Mapping) or not domain.get("key"):
        return None
    return TopologyDomainRef(str(domain["key"]), str(domain.get("value") or ""))


def core_podgroup(
    group: ApiObject, workload: ApiObject | None, *, domain: TopologyDomainRef | None = None
) -> PodGroup:
    """A PodGroup with its Podway annotations read from itself, else from its Workload."""
    annotations = effective_annotations(group.annotations, workload.annotations if workload else {})
    topology = (group.spec.get("schedulingConstraints") or {}).get("topology") or []
    job_owned = workload is not None and (workload.spec.get("controllerRef") or {}).get("kind") == "Job"
    pending_limit = max_pending_seconds(annotations)
    return PodGroup(
        namespace=group.namespace,
        name=group.name,
        uid=group.uid,
        gang_min_count=podgroup_min_count(group),
        topology_key=(topology[0].get("key") or None) if topology else None,
        preferred_topology=tuple(topology_preferred(annotations)),
        priority=int(group.spec.get("priority") or 0),
        created_at=group.created_at,
        workload_name=podgroup_workload_name(group),
        max_pending_seconds=float(pending_limit) if pending_limit else None,
        gang_restart=GangRestartPolicy(gang_restart(annotations, job_owned=job_owned)),
        assigned_domain=domain,
    )


def standalone_podgroup(pod: ApiObject) -> PodGroup:
    """A pod without a PodGroup is scheduled as a basic group of one."""
    return PodGroup(
        namespace=pod.namespace,
        name=STANDALONE_PREFIX + pod.name,
        uid=pod.uid,
        priority=pod_priority(pod),
        created_at=pod.created_at,
    )
