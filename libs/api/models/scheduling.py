"""`scheduling.k8s.io`: Workload and PodGroup (v1alpha2, the v1.36 shapes) and PriorityClass (v1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Final

from pydantic import Field

from libs.api.kinds import SCHEDULING_V1, SCHEDULING_V1ALPHA2, SCHEDULING_V1ALPHA3
from libs.api.models.base import NONE_TO_DICT, NONE_TO_LIST, PODWAY_STATUS, ApiModel
from libs.api.models.meta import ApiObject, Condition

DISRUPTION_MODE_POD: Final = "Pod"
DISRUPTION_MODE_POD_GROUP: Final = "PodGroup"
DISRUPTION_MODES: Final = (DISRUPTION_MODE_POD, DISRUPTION_MODE_POD_GROUP)

PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
PREEMPT_NEVER: Final = "Never"
PREEMPTION_POLICIES: Final = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)

HIGHEST_USER_DEFINABLE_PRIORITY: Final = 1_000_000_000
# Created by the API server itself: name -> value.
SYSTEM_PRIORITY_CLASSES: Final = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}


class TypedLocalObjectReference(ApiModel):
    """The object that manages a Workload (`spec.controllerRef`), e.g. a batch Job."""

    api_group: str | None = None
    kind: str | None = None
    name: str | None = None


class BasicSchedulingPolicy(ApiModel):
    """Place as many pods as fit; no fields."""


class GangSchedulingPolicy(ApiModel):
    """All-or-nothing: at least `minCount` pods are bound together or none is."""

    min_count: int | None = None


class PodGroupSchedulingPolicy(ApiModel):
    """Exactly one of `basic` or `gang`."""

    basic: BasicSchedulingPolicy | None = None
    gang: GangSchedulingPolicy | None = None

    @property
    def gang_min_count(self) -> int | None:
        """minCount of a gang policy, None for a basic one."""
        return self.gang.min_count if self.gang is not None else None


class TopologyConstraint(ApiModel):
    """All pods of the group in one domain of this node label key (a hard constraint)."""

    key: str | None = None


class PodGroupSchedulingConstraints(ApiModel):
    """Placement constraints of a group; v1.36 allows one topology key."""

    topology: Annotated[list[TopologyConstraint], NONE_TO_LIST] = Field(default_factory=list)


class PodGroupResourceClaim(ApiModel):
    """A claim shared by every pod of the group: a claim by name or one made from a template per group."""

    name: str | None = None
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodGroupTemplate(ApiModel):
    """One policy template of a Workload; PodGroups are its runtime instances."""

    name: str | None = None
    scheduling_policy: PodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    resource_claims: Annotated[list[PodGroupResourceClaim], NONE_TO_LIST] = Field(default_factory=list)
    disruption_mode: str | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None


class CompositeGangSchedulingPolicy(ApiModel):
    """All-or-nothing over child groups: at least `minGroupCount` of them are placed together or none is."""

    min_group_count: int | None = None


class CompositePodGroupSchedulingPolicy(ApiModel):
    """Exactly one of `basic` (each child group on its own) or `gang`."""

    basic: BasicSchedulingPolicy | None = None
    gang: CompositeGangSchedulingPolicy | None = None


class CompositeDisruptionMode(ApiModel):
    """How a composite's child groups may be disrupted: exactly one of `single` (each on its own) and `all`
    (only together). Podway treats an unset mode as `all`: a composite is one unit unless it says otherwise."""

    single: dict[str, Any] | None = None
    all: dict[str, Any] | None = None


class CompositePodGroupTemplate(ApiModel):
    """A template for a CompositePodGroup: its policy, and the templates of its children (PodGroups or
    CompositePodGroups, at least one of the two lists)."""

    name: str | None = None
    pod_group_templates: Annotated[list[PodGroupTemplate], NONE_TO_LIST] = Field(default_factory=list)
    composite_pod_group_templates: Annotated[list[CompositePodGroupTemplate], NONE_TO_LIST] = Field(
        default_factory=list
    )
    scheduling_policy: CompositePodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    disruption_mode: CompositeDisruptionMode | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None


class WorkloadSpec(ApiModel):
    """The policy of a Workload: PodGroup templates, or a tree of CompositePodGroup templates (exactly one)."""

    controller_ref: TypedLocalObjectReference | None = None
    pod_group_templates: Annotated[list[PodGroupTemplate], NONE_TO_LIST] = Field(default_factory=list)
    composite_pod_group_templates: Annotated[list[CompositePodGroupTemplate], NONE_TO_LIST] = Field(
        default_factory=list
    )

    def template(self, name: str) -> PodGroupTemplate | None:
        """The PodGroup template with this name anywhere in the tree, if any."""
        return next((template for template in self.all_pod_group_templates() if template.name == name), None)

    def composite_template(self, name: str) -> CompositePodGroupTemplate | None:
        """The CompositePodGroup template with this name anywhere in the tree, if any."""
        return next(
            (
                template
                for template in _composites(self.composite_pod_group_templates)
                if template.name == name
            ),
            None,
        )

    def all_pod_group_templates(self) -> Iterator[PodGroupTemplate]:
        """Every PodGroup template: the top-level ones, then those under each composite template."""
        yield from self.pod_group_templates
        for composite in _composites(self.composite_pod_group_templates):
            yield from composite.pod_group_templates


def _composites(templates: list[CompositePodGroupTemplate]) -> Iterator[CompositePodGroupTemplate]:
    for template in templates:
        yield template
        yield from _composites(template.composite_pod_group_templates)


class Workload(ApiObject):
    """`scheduling.k8s.io/v1alpha2` Workload: an immutable set of PodGroup policy templates."""

    API_VERSION = SCHEDULING_V1ALPHA2
    KIND = "Workload"

    spec: Annotated[WorkloadSpec, NONE_TO_DICT] = Field(default_factory=WorkloadSpec)


class WorkloadTemplateReference(ApiModel):
    """Names the Workload and the template a PodGroup was made from."""

    workload_name: str | None = None
    pod_group_template_name: str | None = None


class PodGroupTemplateReference(ApiModel):
    """`spec.podGroupTemplateRef`; the reference is nested under `workload`."""

    workload: WorkloadTemplateReference | None = None


class PodGroupSpec(ApiModel):
    """A PodGroup's policy, copied from its template; immutable."""

    pod_group_template_ref: PodGroupTemplateReference | None = None
    parent_composite_pod_group_name: str | None = None
    scheduling_policy: PodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    resource_claims: Annotated[list[PodGroupResourceClaim], NONE_TO_LIST] = Field(default_factory=list)
    disruption_mode: str | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None

    @property
    def workload_name(self) -> str | None:
        """The Workload this group instantiates, if it names one."""
        ref = self.pod_group_template_ref
        return ref.workload.workload_name if ref is not None and ref.workload is not None else None


class PodGroupResourceClaimStatus(ApiModel):
    """Which ResourceClaim was made for a group-level claim."""

    name: str | None = None
    resource_claim_name: str | None = None


class PodGroupStatus(ApiModel):
    """Conditions (`PodGroupScheduled`, `DisruptionTarget`) and the claims made for the group."""

    # The scheduler's record of where the group was placed, or proposed to be, and what `get` derives.
    PASSED_THROUGH = frozenset({"placement", "proposal", PODWAY_STATUS})

    conditions: Annotated[list[Condition], NONE_TO_LIST] = Field(default_factory=list)
    resource_claim_statuses: Annotated[list[PodGroupResourceClaimStatus], NONE_TO_LIST] = Field(
        default_factory=list
    )

    def condition(self, condition_type: str) -> Condition | None:
        """The condition of this type, if present."""
        return next((item for item in self.conditions if item.type == condition_type), None)


class PodGroup(ApiObject):
    """`scheduling.k8s.io/v1alpha2` PodGroup: one runtime instance of a template, scheduled as a unit."""

    API_VERSION = SCHEDULING_V1ALPHA2
    KIND = "PodGroup"

    spec: Annotated[PodGroupSpec, NONE_TO_DICT] = Field(default_factory=PodGroupSpec)
    status: Annotated[PodGroupStatus, NONE_TO_DICT] = Field(default_factory=PodGroupStatus)


class WorkloadReference(ApiModel):
    """The Workload and the template within it a group was made from."""

    workload_name: str | None = None
    template_name: str | None = None


class CompositePodGroupSpec(ApiModel):
    """A CompositePodGroup's policy, copied from its template; immutable."""

    workload_ref: WorkloadReference | None = None
    parent_composite_pod_group_name: str | None = None
    scheduling_policy: CompositePodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    disruption_mode: CompositeDisruptionMode | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None

    @property
    def min_group_count(self) -> int | None:
        """How many child groups must be placed together; None for a basic composite."""
        policy = self.scheduling_policy
        return policy.gang.min_group_count if policy is not None and policy.gang is not None else None

    @property
    def disrupted_together(self) -> bool:
        """Whether the children may only be disrupted together (`all`, and an unset mode)."""
        return self.disruption_mode is None or self.disruption_mode.single is None


class CompositePodGroupStatus(ApiModel):
    """Conditions (`CompositePodGroupInitiallyScheduled`, `DisruptionTarget`)."""

    # The scheduler's record of the domain its children share, and what `get` derives.
    PASSED_THROUGH = frozenset({"placement", PODWAY_STATUS})

    conditions: Annotated[list[Condition], NONE_TO_LIST] = Field(default_factory=list)


class CompositePodGroup(ApiObject):
    """`scheduling.k8s.io/v1alpha3` CompositePodGroup: a group of PodGroups (or of CompositePodGroups)
    scheduled as one unit; children name it in `parentCompositePodGroupName`."""

    API_VERSION = SCHEDULING_V1ALPHA3
    KIND = "CompositePodGroup"

    spec: Annotated[CompositePodGroupSpec, NONE_TO_DICT] = Field(default_factory=CompositePodGroupSpec)
    status: Annotated[CompositePodGroupStatus, NONE_TO_DICT] = Field(default_factory=CompositePodGroupStatus)


class PriorityClass(ApiObject):
    """`scheduling.k8s.io/v1` PriorityClass: a named priority value."""

    API_VERSION = SCHEDULING_V1
    KIND = "PriorityClass"

    value: int = 0
    global_default: bool | None = None
    preemption_policy: str | None = None
    description: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """`value` is written even when 0, as upstream's (a Go int32 without `omitempty`)."""
        return {**super().to_wire(), "value": self.value}
