"""Object metadata common to every kind, and the base of every top-level resource model."""

from __future__ import annotations

import uuid
from typing import Annotated, ClassVar, Final

from pydantic import Field

from libs.api.models.base import NONE_TO_LIST, ApiModel, PassThroughModel, StrMap, Timestamp

_PODWAY_UID_NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_DNS, "podway.io")


def derive_uid(kind: str, namespace: str | None, name: str) -> str:
    """A deterministic uid for an object that was given none, so that replays produce the same ids."""
    return str(uuid.uuid5(_PODWAY_UID_NAMESPACE, f"{kind}/{namespace or ''}/{name}"))


def derive_owned_uid(owner_uid: str, kind: str, name: str) -> str:
    """The uid of an object a controller generates, derived from its owner's uid: a new incarnation of the
    owner (a new uid) is a new identity for everything it generates."""
    return str(uuid.uuid5(_PODWAY_UID_NAMESPACE, f"{owner_uid}/{kind}/{name}"))


class OwnerReference(ApiModel):
    """`metav1.OwnerReference`: who owns this object; `controller: true` marks the managing controller."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(PassThroughModel):
    """`metav1.ObjectMeta`, the fields Podway reads; managedFields and the like ride along."""

    PASSED_THROUGH = frozenset({"deletionGracePeriodSeconds", "managedFields", "selfLink"})

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: StrMap = Field(default_factory=dict)
    annotations: StrMap = Field(default_factory=dict)
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    owner_references: Annotated[list[OwnerReference], NONE_TO_LIST] = Field(default_factory=list)
    finalizers: Annotated[list[str], NONE_TO_LIST] = Field(default_factory=list)

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference marked `controller: true`, if any."""
        return next((ref for ref in self.owner_references if ref.controller), None)


class Condition(ApiModel):
    """`metav1.Condition`, used by PodGroup status."""

    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    observed_generation: int | None = None
    last_transition_time: Timestamp | None = None


class ApiObject(ApiModel):
    """A top-level resource: apiVersion, kind, metadata. Subclasses set API_VERSION and KIND."""

    API_VERSION: ClassVar[str]
    KIND: ClassVar[str]

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def model_post_init(self, context: object, /) -> None:
        """Fill apiVersion and kind when a model is built in code rather than parsed."""
        if self.api_version is None:
            self.api_version = self.API_VERSION
        if self.kind is None:
            self.kind = self.KIND

    @property
    def name(self) -> str:
        """metadata.name, or "" when unset."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str | None:
        """metadata.namespace."""
        return self.metadata.namespace
