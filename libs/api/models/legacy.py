"""`scheduling.k8s.io/v1alpha1` (v1.35) Workload, accepted on input and converted to v1alpha2."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from libs.api.kinds import SCHEDULING_V1ALPHA1
from libs.api.models.base import NONE_TO_DICT, NONE_TO_LIST, ApiModel
from libs.api.models.meta import ApiObject
from libs.api.models.scheduling import PodGroupSchedulingPolicy, TypedLocalObjectReference


class LegacyPodGroup(ApiModel):
    """A v1alpha1 `spec.podGroups[]` entry: a name and a policy."""

    name: str | None = None
    policy: PodGroupSchedulingPolicy | None = None


class LegacyWorkloadSpec(ApiModel):
    """v1alpha1 Workload spec."""

    controller_ref: TypedLocalObjectReference | None = None
    pod_groups: Annotated[list[LegacyPodGroup], NONE_TO_LIST] = Field(default_factory=list)


class LegacyWorkload(ApiObject):
    """`scheduling.k8s.io/v1alpha1` Workload."""

    API_VERSION = SCHEDULING_V1ALPHA1
    KIND = "Workload"

    spec: Annotated[LegacyWorkloadSpec, NONE_TO_DICT] = Field(default_factory=LegacyWorkloadSpec)
