"""The Python client: apply manifests, submit Jobs as events, read objects and stories, watch events."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

from libs.api.kinds import is_namespaced
from libs.api.lists import DEFAULT_CHUNK_SIZE
from libs.api.manifests import FieldValidation
from libs.events.admission import JobSubmitted
from libs.events.catalogue import RpcSubject
from libs.events.envelope import AggregateRef, Envelope
from libs.events.rpc import (
    ApplyReply,
    ApplyRequest,
    DeleteRequest,
    EventsReply,
    EventsRequest,
    GetRequest,
    NodePowerReply,
    NodePowerRequest,
    decode_get_reply,
)
from libs.messaging.broker import NatsEndpoint, make_broker
from libs.messaging.publisher import NatsPublisher
from libs.messaging.rpc import RpcUnavailable, request
from libs.messaging.watch import subscribed_events, watch_events

DEFAULT_NAMESPACE = "default"
CONNECT_TIMEOUT_S = 5.0


def with_namespace(manifest: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    """kubectl's defaulting: a namespaced object without a namespace goes to `-n NS` or `default`."""
    kind = manifest.get("kind")
    meta = manifest.get("metadata")
    if not isinstance(kind, str) or not is_namespaced(kind) or not isinstance(meta, dict):
        return manifest
    if meta.get("namespace"):
        return manifest
    return {**manifest, "metadata": {**meta, "namespace": namespace or DEFAULT_NAMESPACE}}


class PodwayClient:
    """`async with PodwayClient(nats_url) as client:` then apply, submit_job, get, events, watch."""

    def __init__(
        self,
        nats_url: str,
        *,
        timeout_s: float = 30.0,
        name: str = "podway-client",
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.broker = make_broker(nats_url, name)
        self.address = NatsEndpoint.parse(nats_url).url  # never the credentials: it goes into messages
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s

    async def __aenter__(self) -> Self:
        # The brokers retry a lost server for ever, the first connection included: right for a service
        # waiting for its bus, a hang for a user's command.
        try:
            await asyncio.wait_for(self.broker.connect(), self.connect_timeout_s)
        except (TimeoutError, OSError) as exc:
            with contextlib.suppress(Exception):
                await self.broker.stop()
            raise RpcUnavailable(
                "BusUnavailable",
                f"cannot reach NATS at {self.address} within {self.connect_timeout_s:g}s "
                "(is the stack up? do its TLS settings match?)",
            ) from exc
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.broker.stop()

    async def apply(
        self,
        manifests: Iterable[dict[str, Any]],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        create_only: bool = False,
        field_validation: FieldValidation = "Warn",
    ) -> ApplyReply:
        """Apply manifests in one request; each gets its own result (created, unchanged, updated, rejected).
        With `create_only`, objects that exist are left as they are; `field_validation` says what unknown
        fields do (Strict refuses the object, Warn admits it with warnings, Ignore admits it silently)."""
        docs = [with_namespace(m, namespace) for m in manifests]
        body = ApplyRequest(
            request_id=str(uuid.uuid4()),
            manifests=docs,
            dry_run=dry_run,
            create_only=create_only,
            field_validation=field_validation,
        )
        raw = await request(self.broker, RpcSubject.ADMISSION_APPLY, body, timeout_s=self.timeout_s)
        return ApplyReply.model_validate_json(raw)

    async def delete(
        self, kind: str, name: str, namespace: str | None = None, *, grace_seconds: int | None = None
    ) -> ApplyReply:
        """Delete an object; `grace_seconds`: how long a running pod it deletes has to stop (else its own
        terminationGracePeriodSeconds)."""
        ns = (namespace or DEFAULT_NAMESPACE) if is_namespaced(kind) else None
        body = DeleteRequest(
            request_id=str(uuid.uuid4()), kind=kind, namespace=ns, name=name, grace_seconds=grace_seconds
        )
        raw = await request(self.broker, RpcSubject.ADMISSION_DELETE, body, timeout_s=self.timeout_s)
        return ApplyReply.model_validate_json(raw)

    async def node_power(self, node: str, *, on: bool) -> NodePowerReply:
        """Take a node's host away (`on=False`: its agent stops beating for it, its pods die unreported) or
        bring it back; RpcUnavailable when no node agent serves that node."""
        body = NodePowerRequest(node=node, on=on)
        raw = await request(self.broker, RpcSubject.NODE_AGENT_POWER, body, timeout_s=self.timeout_s)
        return NodePowerReply.model_validate_json(raw)

    async def submit_job(self, job: dict[str, Any], *, request_id: str | None = None) -> str:
        """Publish `job.submitted`; admission admits (and expands) the Job. Returns the request id."""
        return (await self.publish_job(job, request_id=request_id)).correlation_id

    async def publish_job(self, job: dict[str, Any], *, request_id: str | None = None) -> Envelope:
        """Publish `job.submitted` and return the envelope: its event id, and its request id as correlation
        id, which admission's answer carries."""
        request_id = request_id or str(uuid.uuid4())
        job = with_namespace(job, None)
        meta = job.get("metadata") or {}
        envelope = Envelope.wrap(
            JobSubmitted(request_id=request_id, manifest=job),
            producer="client",
            correlation_id=request_id,
            occurred_at=datetime.now(UTC),
            subject=AggregateRef(kind="Job", namespace=meta.get("namespace"), name=str(meta.get("name", ""))),
        )
        await NatsPublisher(self.broker).publish(envelope)
        return envelope

    async def get(
        self,
        kind: str,
        name: str | None = None,
        namespace: str | None = None,
        *,
        all_namespaces: bool = False,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> list[dict[str, Any]]:
        """One object, or a whole list read in pages of `chunk_size` items (0: in one answer)."""
        ns = (namespace or DEFAULT_NAMESPACE) if is_namespaced(kind) else ""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            body = GetRequest(
                kind=kind,
                namespace=ns,
                name=name,
                all_namespaces=all_namespaces,
                limit=chunk_size or None if name is None else None,
                continue_token=token,
            )
            raw = await request(self.broker, RpcSubject.ADMISSION_GET, body, timeout_s=self.timeout_s)
            reply = decode_get_reply(raw)
            items += reply.items
            token = reply.continue_token
            if token is None:
                return items

    async def events(
        self, *, correlation_id: str | None = None, podgroup: str | None = None, after_seq: int = 0
    ) -> EventsReply:
        """A story from the audit log (`podgroup` is NAMESPACE/NAME)."""
        body = EventsRequest(correlation_id=correlation_id, podgroup=podgroup, after_seq=after_seq)
        raw = await request(self.broker, RpcSubject.ADMISSION_EVENTS, body, timeout_s=self.timeout_s)
        return EventsReply.model_validate_json(raw)

    def watching(self) -> contextlib.AbstractAsyncContextManager[AsyncIterator[Envelope]]:
        """`async with client.watching() as events:`: subscribed on entry, so that no event published from
        inside the block is missed (as `watch()` may miss those published before its first step)."""
        return subscribed_events(self.broker)

    async def watch(self) -> AsyncIterator[Envelope]:
        """Events as they are published, from now on."""
        async for envelope in watch_events(self.broker):
            yield envelope
