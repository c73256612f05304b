"""The kinds the REST API serves that the scheduler has no model for: Namespace, and Event in `v1` and
`events.k8s.io/v1`. Minimal, in the v1.36 shapes, lenient like every other model (`libs/api/models/base.py`)."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from libs.api.models.base import NONE_TO_DICT, NONE_TO_LIST, ApiModel, Timestamp
from libs.api.models.meta import ApiObject

EVENTS_V1: Final = "events.k8s.io/v1"


class NamespaceSpec(ApiModel):
    """What must be done before a Namespace can be removed."""

    finalizers: Annotated[list[str], NONE_TO_LIST] = Field(default_factory=list)


class NamespaceStatus(ApiModel):
    """Whether the Namespace is `Active` or `Terminating`."""

    phase: str | None = None


class Namespace(ApiObject):
    """`v1` Namespace: a scope for the names of namespaced objects."""

    API_VERSION = "v1"
    KIND = "Namespace"

    spec: Annotated[NamespaceSpec, NONE_TO_DICT] = Field(default_factory=NamespaceSpec)
    status: Annotated[NamespaceStatus, NONE_TO_DICT] = Field(default_factory=NamespaceStatus)


class ObjectReference(ApiModel):
    """`v1.ObjectReference`: the object an event is about."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class EventSource(ApiModel):
    """The component (and host) that reported an event."""

    component: str | None = None
    host: str | None = None


class EventSeries(ApiModel):
    """A series of repeated occurrences of an event: how many, and when the last was seen."""

    count: int | None = None
    last_observed_time: Timestamp | None = None


class CoreEvent(ApiObject):
    """`v1` Event: a report of something that happened to an object, in the core group's older shape."""

    API_VERSION = "v1"
    KIND = "Event"

    involved_object: Annotated[ObjectReference, NONE_TO_DICT] = Field(default_factory=ObjectReference)
    reason: str | None = None
    message: str | None = None
    source: EventSource | None = None
    first_timestamp: Timestamp | None = None
    last_timestamp: Timestamp | None = None
    count: int | None = None
    type: str | None = None
    event_time: Timestamp | None = None
    series: EventSeries | None = None
    action: str | None = None
    related: ObjectReference | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None


class Event(ApiObject):
    """`events.k8s.io/v1` Event: a report of something that happened to an object (`regarding`)."""

    API_VERSION = EVENTS_V1
    KIND = "Event"

    event_time: Timestamp | None = None
    series: EventSeries | None = None
    reporting_controller: str | None = None
    reporting_instance: str | None = None
    action: str | None = None
    reason: str | None = None
    regarding: ObjectReference | None = None
    related: ObjectReference | None = None
    note: str | None = None
    type: str | None = None
    deprecated_source: EventSource | None = None
    deprecated_first_timestamp: Timestamp | None = None
    deprecated_last_timestamp: Timestamp | None = None
    deprecated_count: int | None = None


class UserInfo(ApiModel):
    """`authentication.k8s.io/v1` UserInfo: who a request was authenticated as."""

    username: str | None = None
    uid: str | None = None
    groups: Annotated[list[str], NONE_TO_LIST] = Field(default_factory=list)


class SelfSubjectReviewStatus(ApiModel):
    """What the server made of the caller's credentials."""

    user_info: Annotated[UserInfo, NONE_TO_DICT] = Field(default_factory=UserInfo)


class SelfSubjectReview(ApiObject):
    """`authentication.k8s.io/v1` SelfSubjectReview: `kubectl auth whoami`."""

    API_VERSION = "authentication.k8s.io/v1"
    KIND = "SelfSubjectReview"

    status: Annotated[SelfSubjectReviewStatus, NONE_TO_DICT] = Field(default_factory=SelfSubjectReviewStatus)
