"""Request/reply on `podway.rpc.*` (core NATS, queue groups, no stream): commands that want an answer now."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
from faststream import Context
from faststream.message import StreamMessage
from faststream.nats import NatsBroker, NatsResponse
from nats.aio.client import Client
from pydantic import BaseModel

from libs.messaging.codec import raw_body

log = logging.getLogger(__name__)

ERROR_HEADER = "Podway-Rpc-Error"

RpcHandler = Callable[[bytes], Awaitable[bytes | BaseModel]]


class RpcError(Exception):
    """The server answered with an error instead of a reply."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class RpcTimeout(RpcError):
    """No reply before the deadline."""


class RpcUnavailable(RpcError):
    """No server listens on the subject."""


def serve_rpc(
    broker: NatsBroker, subject: str, handler: RpcHandler, *, queue: str, max_in_flight: int = 1
) -> None:
    """Answer requests on `subject` with `handler(request bytes) -> reply`; replicas share the `queue` group.

    `max_in_flight` > 1 handles that many requests concurrently (a handler that batches, such as admission's
    group commit, needs requests to arrive while earlier ones wait).

    A handler exception becomes an error reply (its type in the `Podway-Rpc-Error` header, its message as the
    body), so a caller gets an answer instead of a timeout.
    """

    async def on_request(message: StreamMessage[Any] = Context("message")) -> NatsResponse:
        try:
            reply = await handler(message.body)
        except Exception as exc:
            log.exception("rpc %s failed", subject)
            return NatsResponse(str(exc).encode(), headers={ERROR_HEADER: type(exc).__name__})
        return NatsResponse(_encode(reply))

    if max_in_flight > 1:
        broker.subscriber(
            subject, queue=queue, decoder=raw_body, title=f"{subject}:serve", max_workers=max_in_flight
        )(on_request)
        return
    broker.subscriber(subject, queue=queue, decoder=raw_body, title=f"{subject}:serve")(on_request)


async def request(
    client: Client | NatsBroker, subject: str, payload: bytes | BaseModel, *, timeout_s: float = 5.0
) -> bytes:
    """Send a request and return the reply bytes; raises RpcError, RpcTimeout or RpcUnavailable.

    Takes a nats-py client (the CLI) or a faststream broker (services, and tests under `TestNatsBroker`).
    """
    data = _encode(payload)
    try:
        if isinstance(client, NatsBroker):
            reply = await client.request(data, subject, timeout=timeout_s)
            body, headers = reply.body, reply.headers
        else:
            msg = await client.request(subject, data, timeout=timeout_s)
            body, headers = msg.data, msg.headers or {}
    except nats.errors.NoRespondersError as exc:
        raise RpcUnavailable("NoResponders", f"nobody serves {subject}") from exc
    except (nats.errors.TimeoutError, TimeoutError) as exc:
        raise RpcTimeout("Timeout", f"no reply on {subject} within {timeout_s}s") from exc
    if error_type := headers.get(ERROR_HEADER):
        raise RpcError(error_type, body.decode(errors="replace"))
    return bytes(body)


def _encode(value: bytes | BaseModel) -> bytes:
    return value if isinstance(value, bytes) else value.model_dump_json().encode()
