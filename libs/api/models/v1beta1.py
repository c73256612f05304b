"""`scheduling.k8s.io/v1beta1` (Kubernetes v1.37) Workload and PodGroup as clients write them: the shapes the
served OpenAPI describes. Admission converts them to the stored shape (libs/api/scheduling_versions.py) and
validates that."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from libs.api.kinds import SCHEDULING_V1ALPHA3, SCHEDULING_V1BETA1
from libs.api.models.base import NONE_TO_DICT, NONE_TO_LIST, ApiModel
from libs.api.models.meta import ApiObject
from libs.api.models.scheduling import (
    CompositeDisruptionMode,
    CompositePodGroupSchedulingPolicy,
    PodGroupResourceClaim,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupStatus,
    TypedLocalObjectReference,
    WorkloadReference,
)


class DisruptionMode(ApiModel):
    """How the members of a group may be disrupted: exactly one of `single` (each on its own, the default)
    and `all` (only together)."""

    single: dict[str, Any] | None = None
    all: dict[str, Any] | None = None


class BetaGroupSettings(ApiModel):
    """What a template and a PodGroup both say: policy, constraints, claims, disruption and priority."""

    scheduling_policy: PodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    resource_claims: Annotated[list[PodGroupResourceClaim], NONE_TO_LIST] = Field(default_factory=list)
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None


class BetaPodGroupTemplate(BetaGroupSettings):
    """A template for a set of pods with a scheduling policy."""

    name: str | None = None


class BetaCompositePodGroupTemplate(ApiModel):
    """A template for a CompositePodGroup and its children's templates."""

    name: str | None = None
    pod_group_templates: Annotated[list[BetaPodGroupTemplate], NONE_TO_LIST] = Field(default_factory=list)
    composite_pod_group_templates: Annotated[list[BetaCompositePodGroupTemplate], NONE_TO_LIST] = Field(
        default_factory=list
    )
    scheduling_policy: CompositePodGroupSchedulingPolicy | None = None
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    disruption_mode: CompositeDisruptionMode | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None


class BetaWorkloadSpec(ApiModel):
    """The desired state of a Workload: PodGroup templates or CompositePodGroup templates (exactly one)."""

    controller_ref: TypedLocalObjectReference | None = None
    pod_group_templates: Annotated[list[BetaPodGroupTemplate], NONE_TO_LIST] = Field(default_factory=list)
    composite_pod_group_templates: Annotated[list[BetaCompositePodGroupTemplate], NONE_TO_LIST] = Field(
        default_factory=list
    )


class BetaWorkload(ApiObject):
    """`scheduling.k8s.io/v1beta1` Workload: the scheduling policy of a workload's pod groups."""

    API_VERSION = SCHEDULING_V1BETA1
    KIND = "Workload"

    spec: Annotated[BetaWorkloadSpec, NONE_TO_DICT] = Field(default_factory=BetaWorkloadSpec)


class BetaPodGroupSpec(BetaGroupSettings):
    """The desired state of a PodGroup."""

    workload_ref: WorkloadReference | None = None
    parent_composite_pod_group_name: str | None = None


class BetaPodGroup(ApiObject):
    """`scheduling.k8s.io/v1beta1` PodGroup: one runtime instance of a Workload's pod group."""

    API_VERSION = SCHEDULING_V1BETA1
    KIND = "PodGroup"

    spec: Annotated[BetaPodGroupSpec, NONE_TO_DICT] = Field(default_factory=BetaPodGroupSpec)
    status: Annotated[PodGroupStatus, NONE_TO_DICT] = Field(default_factory=PodGroupStatus)


class AlphaThreeWorkload(BetaWorkload):
    """`scheduling.k8s.io/v1alpha3` Workload: v1beta1's shape."""

    API_VERSION = SCHEDULING_V1ALPHA3


class AlphaThreePodGroup(BetaPodGroup):
    """`scheduling.k8s.io/v1alpha3` PodGroup: v1beta1's shape."""

    API_VERSION = SCHEDULING_V1ALPHA3
