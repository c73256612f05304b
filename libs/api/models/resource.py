"""`resource.k8s.io/v1` (DRA with structured parameters): DeviceClass, ResourceClaim,
ResourceClaimTemplate and ResourceSlice."""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import Field

from libs.api.kinds import RESOURCE_V1
from libs.api.models.base import (
    NONE_TO_DICT,
    NONE_TO_LIST,
    PODWAY_STATUS,
    ApiModel,
    PassThroughModel,
    Quantity,
    QuantityMap,
    Timestamp,
)
from libs.api.models.core import NodeSelector
from libs.api.models.meta import ApiObject, ObjectMeta

ALLOCATION_MODE_EXACT_COUNT: Final = "ExactCount"
ALLOCATION_MODE_ALL: Final = "All"
ALLOCATION_MODES: Final = (ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT)

DEVICE_REQUESTS_MAX: Final = 32
DEVICE_CONSTRAINTS_MAX: Final = 32
DEVICE_SELECTORS_MAX: Final = 32
FIRST_AVAILABLE_MAX: Final = 8
RESOURCE_SLICE_MAX_DEVICES: Final = 128


class CELDeviceSelector(ApiModel):
    """A CEL expression over `device` that must evaluate to true."""

    expression: str | None = None


class DeviceSelector(ApiModel):
    """One selector; CEL is the only kind."""

    cel: CELDeviceSelector | None = None


class DeviceClassSpec(ApiModel):
    """Selectors every device of the class passes, and the extended resource it serves."""

    selectors: Annotated[list[DeviceSelector], NONE_TO_LIST] = Field(default_factory=list)
    config: Annotated[list[dict[str, Any]], NONE_TO_LIST] = Field(default_factory=list)
    extended_resource_name: str | None = None


class DeviceClass(ApiObject):
    """`resource.k8s.io/v1` DeviceClass."""

    API_VERSION = RESOURCE_V1
    KIND = "DeviceClass"

    spec: Annotated[DeviceClassSpec, NONE_TO_DICT] = Field(default_factory=DeviceClassSpec)


class CapacityRequirements(ApiModel):
    """How much of a shareable device's capacity a request consumes (`capacity.requests`)."""

    requests: QuantityMap = Field(default_factory=dict)


class ExactDeviceRequest(ApiModel):
    """Devices of one class: `count` of them (ExactCount) or every matching one (All)."""

    device_class_name: str | None = None
    selectors: Annotated[list[DeviceSelector], NONE_TO_LIST] = Field(default_factory=list)
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: Annotated[list[dict[str, Any]], NONE_TO_LIST] = Field(default_factory=list)
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(ExactDeviceRequest):
    """One alternative of `firstAvailable`, tried in order."""

    name: str | None = None


class DeviceRequest(ApiModel):
    """A named request: exactly one of `exactly` or `firstAvailable`."""

    name: str | None = None
    exactly: ExactDeviceRequest | None = None
    first_available: Annotated[list[DeviceSubRequest], NONE_TO_LIST] = Field(default_factory=list)


class DeviceConstraint(ApiModel):
    """Devices of the named requests share (matchAttribute) or differ in (distinctAttribute) an attribute."""

    requests: Annotated[list[str], NONE_TO_LIST] = Field(default_factory=list)
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaim(ApiModel):
    """Requests, constraints across them, and opaque config."""

    requests: Annotated[list[DeviceRequest], NONE_TO_LIST] = Field(default_factory=list)
    constraints: Annotated[list[DeviceConstraint], NONE_TO_LIST] = Field(default_factory=list)
    config: Annotated[list[dict[str, Any]], NONE_TO_LIST] = Field(default_factory=list)


class ResourceClaimSpec(ApiModel):
    """What a claim asks for."""

    devices: Annotated[DeviceClaim, NONE_TO_DICT] = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(PassThroughModel):
    """One allocated device (or a share of it) for one request."""

    PASSED_THROUGH = frozenset(
        {"adminAccess", "bindingConditions", "bindingFailureConditions", "tolerations"}
    )

    request: str | None = None
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    share_id: str | None = None
    consumed_capacity: QuantityMap = Field(default_factory=dict)


class DeviceAllocationResult(PassThroughModel):
    """The devices allocated to a claim."""

    PASSED_THROUGH = frozenset({"config"})

    results: Annotated[list[DeviceRequestAllocationResult], NONE_TO_LIST] = Field(default_factory=list)


class AllocationResult(PassThroughModel):
    """Where a claim was allocated: devices and the nodes that can reach them."""

    devices: Annotated[DeviceAllocationResult, NONE_TO_DICT] = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None
    allocation_timestamp: Timestamp | None = None


class ResourceClaimConsumerReference(PassThroughModel):
    """A pod or PodGroup a claim is reserved for."""

    api_group: str | None = None
    resource: str | None = None
    name: str | None = None
    uid: str | None = None


class ResourceClaimStatus(PassThroughModel):
    """Allocation and reservations, written by the DRA allocator."""

    PASSED_THROUGH = frozenset({"devices", PODWAY_STATUS})

    allocation: AllocationResult | None = None
    reserved_for: Annotated[list[ResourceClaimConsumerReference], NONE_TO_LIST] = Field(default_factory=list)


class ResourceClaim(ApiObject):
    """`resource.k8s.io/v1` ResourceClaim."""

    API_VERSION = RESOURCE_V1
    KIND = "ResourceClaim"

    spec: Annotated[ResourceClaimSpec, NONE_TO_DICT] = Field(default_factory=ResourceClaimSpec)
    status: Annotated[ResourceClaimStatus, NONE_TO_DICT] = Field(default_factory=ResourceClaimStatus)


class ResourceClaimTemplateSpec(ApiModel):
    """Metadata and spec of the claims made from the template."""

    metadata: Annotated[ObjectMeta, NONE_TO_DICT] = Field(default_factory=ObjectMeta)
    spec: Annotated[ResourceClaimSpec, NONE_TO_DICT] = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(ApiObject):
    """`resource.k8s.io/v1` ResourceClaimTemplate."""

    API_VERSION = RESOURCE_V1
    KIND = "ResourceClaimTemplate"

    spec: Annotated[ResourceClaimTemplateSpec, NONE_TO_DICT] = Field(
        default_factory=ResourceClaimTemplateSpec
    )


class DeviceAttribute(ApiModel):
    """A typed attribute value: exactly one of int, bool, string, version."""

    int_value: int | None = Field(default=None, alias="int")
    bool_value: bool | None = Field(default=None, alias="bool")
    string_value: str | None = Field(default=None, alias="string")
    version_value: str | None = Field(default=None, alias="version")

    @property
    def value(self) -> int | bool | str | None:
        """The value, whichever type it has."""
        for item in (self.int_value, self.bool_value, self.string_value, self.version_value):
            if item is not None:
                return item
        return None


class DeviceCapacity(PassThroughModel):
    """A capacity of a device (memory, cores), shareable when the device allows multiple allocations."""

    PASSED_THROUGH = frozenset({"requestPolicy"})

    value: Quantity | None = None


class Device(PassThroughModel):
    """A device a driver publishes."""

    PASSED_THROUGH = frozenset(
        {
            "allNodes",
            "bindingConditions",
            "bindingFailureConditions",
            "bindsToNode",
            "consumesCounters",
            "nodeName",
            "nodeSelector",
            "taints",
        }
    )

    name: str | None = None
    attributes: Annotated[dict[str, DeviceAttribute], NONE_TO_DICT] = Field(default_factory=dict)
    capacity: Annotated[dict[str, DeviceCapacity], NONE_TO_DICT] = Field(default_factory=dict)
    allow_multiple_allocations: bool | None = None


class ResourcePool(ApiModel):
    """The pool a slice belongs to."""

    name: str | None = None
    generation: int | None = None
    resource_slice_count: int | None = None


class ResourceSliceSpec(PassThroughModel):
    """Devices of one driver and pool, reachable from one node, a node selector, or all nodes."""

    PASSED_THROUGH = frozenset({"perDeviceNodeSelection", "sharedCounters"})

    driver: str | None = None
    pool: Annotated[ResourcePool, NONE_TO_DICT] = Field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    devices: Annotated[list[Device], NONE_TO_LIST] = Field(default_factory=list)


class ResourceSlice(ApiObject):
    """`resource.k8s.io/v1` ResourceSlice."""

    API_VERSION = RESOURCE_V1
    KIND = "ResourceSlice"

    spec: Annotated[ResourceSliceSpec, NONE_TO_DICT] = Field(default_factory=ResourceSliceSpec)
