"""Events of the API front door: submissions, admissions, rejections, deletions and Job expansion."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from libs.events.catalogue import EventType
from libs.events.envelope import EventPayload
from libs.events.registry import event_model


@event_model
class JobSubmitted(EventPayload):
    """A client asks for a batch/v1 Job to be admitted (published by clients, not from an outbox)."""

    TYPE = EventType.JOB_SUBMITTED
    request_id: str = Field(description="Client-chosen id, echoed in the admission events")
    manifest: dict[str, Any] = Field(description="The Job manifest as the client wrote it")


class _Admitted(EventPayload):
    kind: str = Field(description="Object kind")
    api_version: str = Field(description="apiVersion as stored (v1alpha2 after conversion)")
    namespace: str | None = Field(default=None, description="Namespace; None for cluster-scoped kinds")
    name: str = Field(description="Object name")
    uid: str = Field(description="Object uid")
    outcome: Literal["created", "updated"] = Field(description="What the apply did")
    resource_version: int = Field(description="Stored resource version after the write")
    object: dict[str, Any] = Field(description="The full stored object, defaulted")
    warnings: list[str] = Field(default_factory=list, description="Warnings returned to the caller")
    request_id: str | None = Field(default=None, description="The apply or submission that caused it")


@event_model
class WorkloadAdmitted(_Admitted):
    """A Workload was stored."""

    TYPE = EventType.WORKLOAD_ADMITTED


@event_model
class PodGroupAdmitted(_Admitted):
    """A PodGroup was stored."""

    TYPE = EventType.PODGROUP_ADMITTED


@event_model
class PodAdmitted(_Admitted):
    """A Pod was stored."""

    TYPE = EventType.POD_ADMITTED


@event_model
class JobAdmitted(_Admitted):
    """A batch/v1 Job was stored, or, submitted again as it is stored, left as it is."""

    TYPE = EventType.JOB_ADMITTED
    # Wider than its base on purpose: only a Job can be answered `unchanged` (see job.submitted).
    outcome: Literal["created", "updated", "unchanged"] = Field(  # type: ignore[assignment]
        description="What the apply did; `unchanged` answers a Job submitted again as it is stored"
    )


@event_model
class NodeRegistered(_Admitted):
    """A Node was stored (registered or updated)."""

    TYPE = EventType.NODE_REGISTERED


@event_model
class ResourceSlicePublished(_Admitted):
    """A ResourceSlice was stored."""

    TYPE = EventType.RESOURCESLICE_PUBLISHED


@event_model
class ObjectAdmitted(_Admitted):
    """Any other kind was stored (PriorityClass, DeviceClass, ResourceClaim, ResourceClaimTemplate)."""

    TYPE = EventType.OBJECT_ADMITTED


class RejectionCause(BaseModel):
    """One field error, as the API server reports it."""

    model_config = ConfigDict(frozen=True)

    reason: str = Field(description="FieldValueRequired, FieldValueInvalid, ...")
    field: str = Field(description="Field path, e.g. spec.podGroupTemplates[0].name")
    message: str = Field(description="The error text after the field path")


@event_model
class ObjectRejected(EventPayload):
    """A manifest was refused; nothing was written for it."""

    TYPE = EventType.OBJECT_REJECTED
    kind: str | None = Field(description="Kind, when the manifest named one")
    namespace: str | None = Field(default=None, description="Namespace, when known")
    name: str | None = Field(default=None, description="Name, when known")
    message: str = Field(description="The whole answer in the API server's wording")
    causes: list[RejectionCause] = Field(default_factory=list, description="Every field error")
    request_id: str | None = Field(default=None, description="The apply or submission that caused it")


@event_model
class ObjectDeleted(EventPayload):
    """An object was removed: by admission (a PodGroup once its pods finished or went, a Job once nothing it
    owns remains), or a pod by the node agent that terminated it."""

    TYPE = EventType.OBJECT_DELETED
    kind: str = Field(description="Object kind")
    namespace: str | None = Field(default=None, description="Namespace")
    name: str = Field(description="Object name")
    uid: str = Field(description="Object uid")
    request_id: str | None = Field(default=None, description="The delete that caused it")
    reason: str = Field(
        default="deleted", description="Why it went, e.g. terminated on node zone-0-b0-r0-n00"
    )


@event_model
class JobExpanded(EventPayload):
    """Job controller phase 1 turned a Job into a Workload, a PodGroup and Pods (or plain Pods)."""

    TYPE = EventType.JOB_EXPANDED
    namespace: str = Field(description="Namespace of the Job")
    job_name: str = Field(description="Job name")
    job_uid: str = Field(description="Job uid")
    gang: bool = Field(description="Whether the Job became a gang")
    workload_name: str | None = Field(default=None, description="Generated Workload, for gang Jobs")
    podgroup_name: str | None = Field(default=None, description="Generated PodGroup, for gang Jobs")
    pod_names: list[str] = Field(description="Generated Pods, in index order")


@event_model
class JobFinished(EventPayload):
    """A batch/v1 Job reached its terminal condition (`Complete` or `Failed`); it never leaves it."""

    TYPE = EventType.JOB_FINISHED
    namespace: str = Field(description="Namespace of the Job")
    name: str = Field(description="Job name")
    uid: str = Field(description="Job uid")
    condition: Literal["Complete", "Failed"] = Field(description="The terminal condition reached")
    reason: str = Field(default="", description="The condition's reason, e.g. BackoffLimitExceeded")
    message: str = Field(default="", description="The condition's message")


@event_model
class NodeUpdated(_Admitted):
    """A registered Node changed (labels, taints, cordon, allocatable)."""

    TYPE = EventType.NODE_UPDATED
