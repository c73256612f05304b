"""Admission, as the API server reaches it: every read and write is one of admission's requests."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from libs.events.catalogue import RpcSubject
from libs.events.rpc import (
    ApplyReply,
    ApplyRequest,
    ChangesReply,
    ChangesRequest,
    DeleteRequest,
    FramedPage,
    GetRequest,
    Propagation,
    decode_changes_reply,
    decode_framed,
    decode_get_reply,
)
from libs.messaging.broker import Broker
from libs.messaging.errors import RpcError
from libs.messaging.rpc import request

FieldValidation = Literal["Strict", "Warn", "Ignore"]
CHANGES_LIMIT = 2000
"""Changes asked for at once, at most."""

Reply = TypeVar("Reply")
OBJECT_SHARE = 4
"""An object may take this share of the bus's largest message: its change event, and a refusal that quotes
its values back (a 422 names a bad value in its message and its causes), must fit in one message too."""


_PROCESS = secrets.token_hex(8)
_REQUESTS = itertools.count(1)


def request_id() -> str:
    """A request's id in admission's log: this process's own random prefix and a count (a uuid4 per write
    read the kernel's random source each time)."""
    return f"api-{_PROCESS}-{next(_REQUESTS)}"


class Admission:
    """Admission's requests over the bus, with the reply models decoded."""

    def __init__(self, broker: Broker, *, timeout_s: float = 10.0) -> None:
        self._broker = broker
        self._timeout_s = timeout_s

    async def _call(self, subject: str, payload: BaseModel | bytes) -> bytes:
        return await request(self._broker, subject, payload, timeout_s=self._timeout_s)

    async def get(self, kind: str, namespace: str | None, name: str) -> tuple[dict[str, Any], int] | None:
        """One object as `get` reads it, with its revision; None when it does not exist."""
        asked = GetRequest(kind=kind, namespace=namespace or "", name=name)
        reply = decode_get_reply(await self._call(RpcSubject.ADMISSION_GET, asked))
        if not reply.items:
            return None
        return reply.items[0], reply.item_revisions[0]

    async def list(
        self,
        kind: str,
        namespace: str | None,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        involved: str | None = None,
    ) -> FramedPage:
        """One page of objects (all of them without `limit`), each as admission encoded it (see listed.py); a
        page larger than the bus carries is asked for again in halves, so a page may hold fewer than `limit`
        objects and a `continue_token`."""

        async def page(size: int | None) -> FramedPage:
            asked = GetRequest(
                kind=kind,
                namespace=namespace,
                all_namespaces=namespace is None,
                limit=size,
                continue_token=continue_token,
                involved=involved,
                framed=True,
            )
            return decode_framed(await self._call(RpcSubject.ADMISSION_GET, asked))

        return await _halving(page, limit)

    async def apply(
        self,
        manifest: dict[str, Any],
        *,
        create_only: bool = False,
        dry_run: bool = False,
        field_validation: FieldValidation = "Strict",
        expected_revision: int | None = None,
    ) -> ApplyReply:
        asked = ApplyRequest(
            request_id=request_id(),
            manifests=[manifest],
            create_only=create_only,
            dry_run=dry_run,
            field_validation=field_validation,
            expected_revision=expected_revision,
            read_back=not dry_run,
        )
        data = asked.model_dump_json().encode()
        connection = getattr(self._broker, "_connection", None)
        limit = (connection.max_payload if connection is not None else 0) // OBJECT_SHARE
        if limit and len(data) > limit:
            # Admitted, it could not travel the bus as a change event: refused before it is written.
            raise RpcError("RequestTooLarge", f"limit is {limit}, got {len(data)} bytes")
        return ApplyReply.model_validate_json(await self._call(RpcSubject.ADMISSION_APPLY, data))

    async def delete(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        propagation: Propagation | None = None,
        grace_seconds: int | None = None,
    ) -> ApplyReply:
        asked = DeleteRequest(
            request_id=request_id(),
            kind=kind,
            namespace=namespace,
            name=name,
            propagation=propagation,
            grace_seconds=grace_seconds,
        )
        return ApplyReply.model_validate_json(await self._call(RpcSubject.ADMISSION_DELETE, asked))

    async def changes(
        self, after: int, *, after_uid: str | None = None, limit: int = CHANGES_LIMIT
    ) -> ChangesReply:
        asked = ChangesRequest(after=after, after_uid=after_uid, limit=limit)
        return decode_changes_reply(await self._call(RpcSubject.ADMISSION_CHANGES, asked))


async def _halving(ask: Callable[[int | None], Awaitable[Reply]], limit: int | None) -> Reply:
    """`ask(limit)`, asked again with half the limit while its answer is larger than the bus carries (a
    request without a limit is answered whole, or not at all)."""
    while True:
        try:
            return await ask(limit)
        except RpcError as error:
            if error.error_type != "AnswerTooLarge" or limit is None or limit == 1:
                raise
            limit //= 2
