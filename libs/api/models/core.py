"""`core/v1`: Pod and Node, with the parts the scheduler reads (requests, tolerations, node selectors)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final

from pydantic import Field

from libs.api.kinds import CORE_V1
from libs.api.models.base import (
    NONE_TO_DICT,
    NONE_TO_LIST,
    PODWAY_STATUS,
    ApiModel,
    PassThroughModel,
    QuantityMap,
    StrMap,
)
from libs.api.models.meta import ApiObject
from libs.api.quantity import canonical_amounts

DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS: Final = ("Equal", "Exists")
POD_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


class ResourceClaimReference(ApiModel):
    """A container's use of one of its pod's claims (optionally one request of it)."""

    name: str | None = None
    request: str | None = None


class ResourceRequirements(PassThroughModel):
    """Container `resources`: requests, limits and DRA claims."""

    requests: QuantityMap = Field(default_factory=dict)
    limits: QuantityMap = Field(default_factory=dict)
    claims: Annotated[list[ResourceClaimReference], NONE_TO_LIST] = Field(default_factory=list)


class Container(PassThroughModel):
    """A container; Podway reads its name, image and resources, everything else rides along."""

    PASSED_THROUGH = frozenset(
        {
            "args",
            "command",
            "env",
            "envFrom",
            "imagePullPolicy",
            "lifecycle",
            "livenessProbe",
            "ports",
            "readinessProbe",
            "resizePolicy",
            "restartPolicy",
            "restartPolicyRules",
            "securityContext",
            "startupProbe",
            "stdin",
            "stdinOnce",
            "terminationMessagePath",
            "terminationMessagePolicy",
            "tty",
            "volumeDevices",
            "volumeMounts",
            "workingDir",
        }
    )

    name: str | None = None
    image: str | None = None
    resources: Annotated[ResourceRequirements, NONE_TO_DICT] = Field(default_factory=ResourceRequirements)


class PodResourceClaim(ApiModel):
    """A pod-level claim: by name, or one claim per pod made from a template."""

    name: str | None = None
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSchedulingGroup(ApiModel):
    """`spec.schedulingGroup`: the PodGroup this pod is scheduled with (v1.36)."""

    pod_group_name: str | None = None


class LegacyWorkloadReference(ApiModel):
    """The v1.35 `spec.workloadRef`, accepted on input and converted to `schedulingGroup`."""

    name: str | None = None
    pod_group: str | None = None
    pod_group_replica_key: str | None = None


class Taint(ApiModel):
    """A node taint."""

    key: str | None = None
    value: str | None = None
    effect: str | None = None
    time_added: str | None = None


class Toleration(ApiModel):
    """A pod toleration."""

    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration matches the taint (`v1.Toleration.ToleratesTaint`)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in (None, "", "Equal"):
            return (self.value or "") == (taint.value or "")
        return False


class PodSpec(PassThroughModel):
    """The pod spec fields Podway schedules on; the rest (volumes, affinity, ...) rides along."""

    PASSED_THROUGH = frozenset(
        {
            "activeDeadlineSeconds",
            "affinity",
            "automountServiceAccountToken",
            "dnsConfig",
            "dnsPolicy",
            "enableServiceLinks",
            "ephemeralContainers",
            "hostAliases",
            "hostIPC",
            "hostNetwork",
            "hostPID",
            "hostUsers",
            "hostname",
            "hostnameOverride",
            "imagePullSecrets",
            "os",
            "readinessGates",
            "resources",
            "runtimeClassName",
            "schedulingGates",
            "securityContext",
            "serviceAccount",
            "serviceAccountName",
            "setHostnameAsFQDN",
            "shareProcessNamespace",
            "subdomain",
            "terminationGracePeriodSeconds",
            "topologySpreadConstraints",
            "volumes",
        }
    )

    scheduler_name: str | None = None
    scheduling_group: PodSchedulingGroup | None = None
    workload_ref: LegacyWorkloadReference | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None
    node_selector: StrMap = Field(default_factory=dict)
    tolerations: Annotated[list[Toleration], NONE_TO_LIST] = Field(default_factory=list)
    resource_claims: Annotated[list[PodResourceClaim], NONE_TO_LIST] = Field(default_factory=list)
    containers: Annotated[list[Container], NONE_TO_LIST] = Field(default_factory=list)
    init_containers: Annotated[list[Container], NONE_TO_LIST] = Field(default_factory=list)
    overhead: QuantityMap = Field(default_factory=dict)
    node_name: str | None = None
    restart_policy: str | None = None

    def requests(self) -> dict[str, int]:
        """Effective requests in canonical integers (cpu in millicores): the larger of the containers' sum
        and any single init container, plus overhead, as the scheduler counts them."""
        total: dict[str, int] = {}
        for container in self.containers:
            for name, amount in canonical_amounts(container.resources.requests).items():
                total[name] = total.get(name, 0) + amount
        for container in self.init_containers:
            for name, amount in canonical_amounts(container.resources.requests).items():
                total[name] = max(total.get(name, 0), amount)
        for name, amount in canonical_amounts(self.overhead).items():
            total[name] = total.get(name, 0) + amount
        return total


class PodCondition(PassThroughModel):
    """A pod condition (`PodScheduled`, `DisruptionTarget`, ...)."""

    PASSED_THROUGH = frozenset({"lastProbeTime", "lastTransitionTime", "observedGeneration"})

    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None


class PodStatus(PassThroughModel):
    """Phase and conditions; written by the scheduler and node agents, not by users."""

    PASSED_THROUGH = frozenset(
        {
            PODWAY_STATUS,
            "allocatedResources",
            "containerStatuses",
            "ephemeralContainerStatuses",
            "extendedResourceClaimStatus",
            "hostIP",
            "hostIPs",
            "initContainerStatuses",
            "message",
            "observedGeneration",
            "podIP",
            "podIPs",
            "qosClass",
            "reason",
            "resize",
            "resourceClaimStatuses",
            "resources",
        }
    )

    phase: str | None = None
    conditions: Annotated[list[PodCondition], NONE_TO_LIST] = Field(default_factory=list)
    nominated_node_name: str | None = None
    start_time: str | None = None


class Pod(ApiObject):
    """`v1` Pod."""

    API_VERSION = CORE_V1
    KIND = "Pod"

    spec: Annotated[PodSpec, NONE_TO_DICT] = Field(default_factory=PodSpec)
    status: Annotated[PodStatus, NONE_TO_DICT] = Field(default_factory=PodStatus)


class NodeSelectorRequirement(ApiModel):
    """One `key operator values` expression of a node selector term."""

    key: str | None = None
    operator: str | None = None
    values: Annotated[list[str], NONE_TO_LIST] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with these labels satisfies the expression."""
        present = self.key in labels
        actual = labels.get(self.key or "")
        match self.operator:
            case "In":
                return present and actual in self.values
            case "NotIn":
                return not present or actual not in self.values
            case "Exists":
                return present
            case "DoesNotExist":
                return not present
            case "Gt" | "Lt":
                return present and _compare_integers(actual, self.values, self.operator)
        return False


def _compare_integers(actual: str | None, values: list[str], operator: str) -> bool:
    try:
        left, right = int(actual or ""), int(values[0])
    except (ValueError, IndexError):
        return False
    return left > right if operator == "Gt" else left < right


class NodeSelectorTerm(ApiModel):
    """Expressions that must all hold; an empty term selects nothing."""

    match_expressions: Annotated[list[NodeSelectorRequirement], NONE_TO_LIST] = Field(default_factory=list)
    match_fields: Annotated[list[NodeSelectorRequirement], NONE_TO_LIST] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
        """Whether a node with these labels and fields (`metadata.name`) satisfies every expression."""
        if not self.match_expressions and not self.match_fields:
            return False
        return all(item.matches(labels) for item in self.match_expressions) and all(
            item.matches(fields) for item in self.match_fields
        )


class NodeSelector(ApiModel):
    """Terms of which at least one must hold (ResourceSlice `nodeSelector`, node affinity)."""

    node_selector_terms: Annotated[list[NodeSelectorTerm], NONE_TO_LIST] = Field(default_factory=list)

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Whether the named node with these labels is selected."""
        fields = {"metadata.name": node_name}
        return any(term.matches(labels, fields) for term in self.node_selector_terms)


class NodeSpec(PassThroughModel):
    """Taints and cordon state."""

    PASSED_THROUGH = frozenset({"configSource", "externalID", "podCIDR", "podCIDRs", "providerID"})

    taints: Annotated[list[Taint], NONE_TO_LIST] = Field(default_factory=list)
    unschedulable: bool | None = None


class NodeStatus(PassThroughModel):
    """What the node offers."""

    PASSED_THROUGH = frozenset(
        {
            "addresses",
            "conditions",
            "config",
            "daemonEndpoints",
            "declaredFeatures",
            "features",
            "images",
            "nodeInfo",
            "phase",
            "runtimeHandlers",
            "volumesAttached",
            "volumesInUse",
        }
    )

    allocatable: QuantityMap = Field(default_factory=dict)
    capacity: QuantityMap = Field(default_factory=dict)


class Node(ApiObject):
    """`v1` Node."""

    API_VERSION = CORE_V1
    KIND = "Node"

    spec: Annotated[NodeSpec, NONE_TO_DICT] = Field(default_factory=NodeSpec)
    status: Annotated[NodeStatus, NONE_TO_DICT] = Field(default_factory=NodeStatus)

    def allocatable_amounts(self) -> dict[str, int]:
        """Allocatable (capacity when allocatable is not reported) in canonical integers."""
        return canonical_amounts(self.status.allocatable or self.status.capacity)


class NamespaceSpec(ApiModel):
    """What must be done before the namespace is gone."""

    finalizers: list[str] | None = None


class Namespace(ApiObject):
    """`v1` Namespace. Objects name a namespace whether or not one is stored; a stored one carries its labels,
    annotations and creation time, and is listed while empty."""

    API_VERSION = CORE_V1
    KIND = "Namespace"

    spec: Annotated[NamespaceSpec, NONE_TO_DICT] = Field(default_factory=NamespaceSpec)
