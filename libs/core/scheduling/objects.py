"""API objects as the scheduling core sees them: the one place manifests become core types.

Objects reach the scheduler two ways, as stored rows (when it loads its world) and inside `*.admitted`
events; the service turns both into an `ApiObject` first, and this module maps those onto the core's
types: Nodes into `Node` (GPUs are DRA devices, counted per DeviceClass), Pods into `PodRequest`, PodGroups
with their Workload into `PodGroup`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from libs.api.annotations import effective_annotations, gang_restart, max_pending_seconds, topology_preferred
from libs.api.quantity import QuantityError, milli_value, value
from libs.core.dra.claims import ClaimSpec
from libs.core.dra.requests import extended_resource_devices, extended_resources_claim

from .lifecycle import PodPhase
from .model import (
    DEFAULT_SCHEDULER_NAME,
    GangRestartPolicy,
    Node,
    PodGroup,
    PodRequest,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyDomainRef,
)

STANDALONE_PREFIX = "pod/"
"""Name prefix of the one-pod basic group a pod without a PodGroup is scheduled as ('/' is never in a
PodGroup name, so the keys cannot collide)."""


@dataclass(frozen=True, slots=True)
class ApiObject:
    """A stored API object, whether read from the database or carried by an `*.admitted` event.

    `resource_version` orders the versions of one object (one uid): a consumer never goes back to an older
    one. `created_at` is Unix seconds.
    """

    kind: str
    namespace: str
    name: str
    uid: str
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    created_at: float = 0.0
    resource_version: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def annotations(self) -> Mapping[str, str]:
        annotations: Mapping[str, str] = self.metadata.get("annotations") or {}
        return annotations

    @property
    def labels(self) -> Mapping[str, str]:
        labels: Mapping[str, str] = self.metadata.get("labels") or {}
        return labels

    @classmethod
    def from_manifest(
        cls, manifest: Mapping[str, Any], *, uid: str | None = None, resource_version: int | None = None
    ) -> ApiObject:
        """The object a manifest describes (`uid` and `resource_version` override its metadata's)."""
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
            resource_version=(
                resource_version if resource_version is not None else _int(metadata.get("resourceVersion"))
            ),
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


def _int(text: Any) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


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
    name: str | None = (pod.spec.get("schedulingGroup") or {}).get("podGroupName") or None
    return name


def pod_phase(pod: ApiObject) -> PodPhase:
    try:
        return PodPhase(pod.status.get("phase") or PodPhase.PENDING)
    except ValueError:
        return PodPhase.UNKNOWN


def pod_has_claims(pod: ApiObject) -> bool:
    return bool(pod.spec.get("resourceClaims"))


def pod_priority(pod: ApiObject) -> int:
    return int(pod.spec.get("priority") or 0)


def pod_request(
    pod: ApiObject,
    extended_resources: Mapping[str, str],
    claim_devices: Mapping[str, int] | None = None,
    claims: tuple[ClaimSpec, ...] = (),
) -> PodRequest:
    """What a pod asks for: the effective request of its containers (max of the init containers' and the
    containers' sum, plus overhead, as kube-scheduler computes it), its extended resources as devices of the
    DeviceClasses serving them, `claim_devices` (whole devices its own claims surely need) and its own
    `claims`; with claims, its extended resources become one more claim, so one search picks every device."""
    totals = _effective_requests(pod.spec)
    devices = dict(claim_devices or {})
    extended = extended_resource_devices(totals, extended_resources)
    for device_class, count in extended.items():
        devices[device_class] = devices.get(device_class, 0) + count
    if claims and extended:
        claims = (*claims, extended_resources_claim(extended))
    return PodRequest(
        uid=pod.uid,
        name=pod.name,
        cpu_milli=totals.get("cpu", 0),
        memory=totals.get("memory", 0),
        devices=devices,
        node_selector=dict(pod.spec.get("nodeSelector") or {}),
        tolerations=tuple(_toleration(raw) for raw in pod.spec.get("tolerations") or []),
        scheduler_name=pod.spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME,
        claims=claims,
    )


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


# -- groups ---------------------------------------------------------------------------------------------------


def podgroup_min_count(group: ApiObject) -> int | None:
    """A gang's minCount, None for a basic group."""
    gang = (group.spec.get("schedulingPolicy") or {}).get("gang")
    if not isinstance(gang, Mapping):
        return None
    return int(gang.get("minCount") or 1)


def podgroup_workload_name(group: ApiObject) -> str | None:
    ref = (group.spec.get("podGroupTemplateRef") or {}).get("workload") or {}
    name: str | None = ref.get("workloadName") or None
    return name


def podgroup_has_claims(group: ApiObject) -> bool:
    return bool(group.spec.get("resourceClaims"))


def assigned_domain(group: ApiObject) -> TopologyDomainRef | None:
    """The domain a scheduled gang was given (`status.placement.domain`), which later pods join."""
    domain = (group.status.get("placement") or {}).get("domain")
    if not isinstance(domain, Mapping) or not domain.get("key"):
        return None
    return TopologyDomainRef(str(domain["key"]), str(domain.get("value") or ""))


def parent_composite(group: ApiObject) -> str | None:
    """The CompositePodGroup a PodGroup belongs to (`spec.parentCompositePodGroupName`), if any."""
    name = group.spec.get("parentCompositePodGroupName")
    return name if isinstance(name, str) and name else None


def composite_min_group_count(composite: ApiObject) -> int | None:
    """A composite gang's minGroupCount, None for a basic composite."""
    gang = (composite.spec.get("schedulingPolicy") or {}).get("gang")
    if not isinstance(gang, Mapping):
        return None
    return int(gang.get("minGroupCount") or 1)


def composite_topology_key(composite: ApiObject) -> str | None:
    topology = (composite.spec.get("schedulingConstraints") or {}).get("topology") or []
    return (topology[0].get("key") or None) if topology else None


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


COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def completion_index(pod: ApiObject) -> int | None:
    """An Indexed Job pod's completion index (annotation, else label), None for other pods."""
    value = pod.annotations.get(COMPLETION_INDEX) or pod.labels.get(COMPLETION_INDEX)
    return int(value) if value is not None and value.isdigit() else None
