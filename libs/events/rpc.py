"""Request/reply messages on `podway.rpc.admission.*`: the API front door's wire contract."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field

Outcome = Literal["created", "unchanged", "updated", "deleted", "rejected", "not_found", "pending"]


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True)


class ApplyRequest(_Message):
    """Apply manifests in one request; each manifest gets its own result."""

    request_id: str = Field(description="Caller's id, used as correlation for rejections")
    manifests: list[dict[str, Any]] = Field(description="Kubernetes manifests, any supported kind")
    dry_run: bool = Field(default=False, description="Validate and decide, write nothing")
    create_only: bool = Field(
        default=False, description="As `kubectl create`: an object that exists is left as it is (unchanged)"
    )
    expected_revision: int | None = Field(
        default=None,
        description="The revision the one object applied must still have, or be refused with 409 Conflict (the "
        "Kubernetes API's resourceVersion precondition of an update)",
    )
    field_validation: Literal["Strict", "Warn", "Ignore"] = Field(
        default="Warn",
        description="Unknown fields: refuse the object (Strict), admit it with a warning per field (Warn), "
        "or admit it silently (Ignore); the API server's `fieldValidation`",
    )
    read_back: bool = Field(
        default=False,
        description="Answer with each object written as `get` reads it once committed (ObjectResult.object), "
        "so that a caller who shows what it wrote need not ask again",
    )


class ObjectResult(_Message):
    """What happened to one manifest."""

    kind: str | None = Field(default=None)
    namespace: str | None = Field(default=None)
    name: str | None = Field(default=None)
    uid: str | None = Field(default=None)
    outcome: Outcome = Field(description="created / unchanged / updated / deleted / rejected / ...")
    message: str = Field(default="", description="Rejection text in the API server's wording")
    status: dict[str, Any] | None = Field(default=None, description="Kubernetes Status for rejections")
    warnings: list[str] = Field(default_factory=list)
    object: dict[str, Any] | None = Field(
        default=None, description="With `read_back`: the object written, as `get` reads it after the commit"
    )
    revision: int | None = Field(default=None, description="With `read_back`: the object's revision")


class ApplyReply(_Message):
    request_id: str
    results: list[ObjectResult]
    warnings: list[str] = Field(default_factory=list, description="Warnings about the whole batch")


Propagation = Literal["Foreground", "Background", "Orphan"]


class DeleteRequest(_Message):
    request_id: str
    kind: str
    namespace: str | None = None
    name: str
    propagation: Propagation | None = Field(
        default=None,
        description="What becomes of the objects it owns (the API server's propagationPolicy): Foreground, "
        "it stays marked until they are gone; Background, it goes now and they are deleted; Orphan, it goes now "
        "and they stay, without its ownerReference. None: Podway's default, Foreground",
    )
    grace_seconds: int | None = Field(
        default=None,
        ge=0,
        description="How long a running pod it deletes has to stop (the API server's gracePeriodSeconds); "
        "None: the pod's terminationGracePeriodSeconds",
    )


class GetRequest(_Message):
    """Read objects: one by name, or a list filtered by kind and namespace, whole or in pages (`limit`, then
    the `continue_token` of the page before, as the API server's `limit` and `continue`)."""

    kind: str
    namespace: str | None = None
    name: str | None = None
    all_namespaces: bool = False
    limit: int | None = Field(
        default=None, ge=1, description="At most this many items; the rest in later pages"
    )
    continue_token: str | None = Field(default=None, description="Where the page before ended")
    involved: str | None = Field(
        default=None, description="Events only: those about the object of this name (and its gang's)"
    )
    framed: bool = Field(
        default=False,
        description="Answer as lines: the reply without its items, then each item (see encode_framed)",
    )


class GetReply(_Message):
    items: list[dict[str, Any]]
    continue_token: str | None = Field(default=None, description="Set when more items follow: ask with it")
    revision: int = Field(default=0, description="The revision the list is at least as new as")
    item_revisions: list[int] = Field(
        default_factory=list, description="Each item's revision (the Kubernetes API's resourceVersion)"
    )


class ChangesRequest(_Message):
    """What changed after a revision, for watchers: the objects as `get` reads them, deletions as they were."""

    after: int = Field(ge=0)
    after_uid: str | None = Field(
        default=None, description="Resume inside revision `after`, after this object (a partial page's end)"
    )
    kinds: list[str] = Field(default_factory=list, description="Only these kinds; all when empty")
    limit: int = Field(default=2000, ge=1, le=10000)


class Change(_Message):
    type: Literal["ADDED", "MODIFIED", "DELETED"]
    revision: int
    created_revision: int = Field(default=0, description="The revision that created the object")
    object: dict[str, Any]


class ChangesReply(_Message):
    revision: int = Field(description="Ask again after this one")
    compacted: int = Field(description="A watch resuming from before this revision has missed deletions")
    changes: list[Change]
    partial_uid: str | None = Field(
        default=None, description="The page ended inside `revision`: ask again after this uid of it"
    )


class EventsRequest(_Message):
    """Audit-log query: a correlation id, a PodGroup by name, or an inference request id."""

    correlation_id: str | None = None
    podgroup: str | None = Field(default=None, description="NAMESPACE/NAME")
    after_seq: int = 0
    limit: int = 1000


class EventsReply(_Message):
    events: list[dict[str, Any]]
    last_seq: int = 0


class ErrorReply(_Message):
    """A request the service could not process at all (malformed request)."""

    error: str


class NodePowerRequest(_Message):
    """Take a node away (its host goes dark: no beats, its pods die unreported) or bring it back."""

    node: str
    on: bool


class NodePowerReply(_Message):
    node: str
    agent: str
    on: bool
    pods_stopped: int = Field(default=0, description="Pods that died with the host (taking it away)")
    pods_failed: int = Field(default=0, description="Pods reported failed because the host restarted")


# Lists and change pages carry thousands of objects that are JSON already: pydantic's walk over them cost
# admission and the API server most of a list's time. These write and read them with orjson instead.


def encode_objects(reply: GetReply | ChangesReply) -> bytes:
    """The reply as `model_dump_json` writes it, written by orjson."""
    try:
        return orjson.dumps(_fields(reply), default=_fields)
    except TypeError:  # what orjson cannot write (a non-string key), pydantic still does
        return reply.model_dump_json().encode()


def encode_framed(reply: GetReply) -> bytes:
    """The reply as lines: its fields but the items, then each item on a line of its own (JSON written by
    orjson holds no raw line break), so that a reader tells the items apart without decoding them, and may
    keep what it decoded of each by its encoding (the API server's lists: see listed.py)."""
    header = orjson.dumps(
        {name: getattr(reply, name) for name in type(reply).model_fields if name != "items"}
    )
    items = [item if isinstance(item, bytes) else orjson.dumps(item, default=_fields) for item in reply.items]
    return b"\n".join([header, *items])


class FramedPage(NamedTuple):
    """A GetReply written by `encode_framed`, its items as encoded."""

    items: list[bytes]
    item_revisions: list[int]
    continue_token: str | None
    revision: int


def decode_framed(raw: bytes) -> FramedPage:
    """A reply `encode_framed` wrote; one written whole (an admission that frames no answer) is taken apart."""
    header, *items = raw.split(b"\n")
    given = orjson.loads(header)
    if "items" in given:
        items = [orjson.dumps(item) for item in given["items"]]
    return FramedPage(
        items=items,
        item_revisions=list(given.get("item_revisions") or []),
        continue_token=given.get("continue_token"),
        revision=int(given.get("revision") or 0),
    )


def decode_get_reply(raw: bytes) -> GetReply:
    """A GetReply admission wrote, read without validating each object again."""
    return GetReply.model_construct(**orjson.loads(raw))


def decode_changes_reply(raw: bytes) -> ChangesReply:
    """A ChangesReply admission wrote, read without validating each object again."""
    given = orjson.loads(raw)
    changes = [Change.model_construct(**change) for change in given.pop("changes")]
    return ChangesReply.model_construct(changes=changes, **given)


def _fields(model: Any) -> Any:
    if isinstance(model, bytes):  # an item already encoded (admission's pods)
        return orjson.Fragment(model)
    if not isinstance(model, BaseModel):
        raise TypeError(f"{type(model).__name__} is not JSON")
    return {name: getattr(model, name) for name in type(model).model_fields}
