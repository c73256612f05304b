"""Request/reply on `podway.rpc.*` (core NATS, queue groups, no stream): commands that want an answer now."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats.errors
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from prometheus_client import Histogram
from pydantic import BaseModel

from libs.messaging.errors import RpcError, RpcTimeout, RpcUnavailable
from libs.runtime.metrics import RPC_SECONDS

log = logging.getLogger(__name__)

__all__ = ["ERROR_HEADER", "RpcError", "RpcTimeout", "RpcUnavailable", "request", "serve_rpc", "start_rpc"]

ERROR_HEADER = "Podway-Rpc-Error"

RpcHandler = Callable[[bytes], Awaitable[bytes | BaseModel | None]]
"""Request bytes in, the reply out; None when the request is another server's to answer (with no queue
group, every server hears it: the one it concerns answers)."""


@dataclass(frozen=True, slots=True)
class _Route:
    subject: str
    handler: RpcHandler
    queue: str
    max_in_flight: int


_ROUTES: weakref.WeakKeyDictionary[NatsBroker, list[_Route]] = weakref.WeakKeyDictionary()


def serve_rpc(
    broker: NatsBroker, subject: str, handler: RpcHandler, *, queue: str, max_in_flight: int = 1
) -> None:
    """Answer requests on `subject` with `handler(request bytes) -> reply`; replicas share the `queue` group.
    Served once the broker is started by `start_broker` (see `start_rpc`).

    `max_in_flight` > 1 handles that many requests concurrently (a handler that batches, such as admission's
    group commit, needs requests to arrive while earlier ones wait).

    A handler exception becomes an error reply (its type in the `Podway-Rpc-Error` header, its message as the
    body), so a caller gets an answer instead of a timeout.
    """
    _ROUTES.setdefault(broker, []).append(_Route(subject, handler, queue, max_in_flight))


async def start_rpc(broker: NatsBroker) -> None:
    """Subscribe the routes `serve_rpc` registered on `broker` (connected), as plain core-NATS queue
    subscriptions: a request is bytes in, bytes out, so faststream's per-message decoding and dependency
    injection would be pure overhead on admission's hottest path."""
    client: Client = broker.connection
    for route in _ROUTES.get(broker, []):
        await client.subscribe(route.subject, queue=route.queue, cb=_serve(client, route))


def _serve(client: Client, route: _Route) -> Callable[[Msg], Awaitable[None]]:
    if route.max_in_flight <= 1:

        async def one_at_a_time(msg: Msg) -> None:
            await _answer(client, route, msg)

        return one_at_a_time
    slots = asyncio.Semaphore(route.max_in_flight)
    tasks: set[asyncio.Task[None]] = set()

    async def concurrently(msg: Msg) -> None:
        await slots.acquire()  # back-pressure: further requests wait in the subscription's queue
        task = asyncio.get_running_loop().create_task(_answer(client, route, msg))
        tasks.add(task)
        task.add_done_callback(finished)

    def finished(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        slots.release()

    return concurrently


@functools.cache
def _timer(subject: str, outcome: str) -> Histogram:
    """The labelled histogram, looked up once (prometheus_client hashes and locks on every `labels`)."""
    return RPC_SECONDS.labels(subject, outcome)


async def _answer(client: Client, route: _Route, msg: Msg) -> None:
    started = time.perf_counter()
    try:
        answer = await route.handler(msg.data)
        if answer is None:
            return
        reply, headers = _encode(answer), None
    except Exception as exc:
        log.exception("rpc %s failed", route.subject)
        reply, headers = str(exc).encode(), {ERROR_HEADER: type(exc).__name__}
    _timer(route.subject, "ok" if headers is None else "error").observe(time.perf_counter() - started)
    if msg.reply:
        try:
            await client.publish(msg.reply, reply, headers=headers)
        except nats.errors.MaxPayloadError:
            # Said to the caller at once (it would otherwise wait out its time-out for an answer never sent).
            limit = client.max_payload
            log.warning("rpc %s: answer of %d bytes over the bus's %d", route.subject, len(reply), limit)
            refusal = (
                f"the answer ({len(reply)} bytes) is larger than the bus carries ({limit} bytes); "
                "ask for less (one namespace, a label selector, or one object by name)"
            )
            with contextlib.suppress(nats.errors.Error):
                await client.publish(msg.reply, refusal.encode(), headers={ERROR_HEADER: "AnswerTooLarge"})
        except nats.errors.Error:
            log.warning("rpc %s: could not answer (connection closing)", route.subject)


async def request(
    client: Client | NatsBroker, subject: str, payload: bytes | BaseModel, *, timeout_s: float = 5.0
) -> bytes:
    """Send a request and return the reply bytes; raises RpcError, RpcTimeout or RpcUnavailable.

    Takes a nats-py client (the CLI) or a faststream broker (services).
    """
    data = _encode(payload)
    connection = client._connection if isinstance(client, NatsBroker) else client
    if connection is None or not connection.is_connected:
        # nats-py would hold the request in its buffer until the server is back or the time-out passes.
        raise RpcUnavailable("BusUnavailable", f"the NATS connection is down (reconnecting); retry {subject}")
    try:
        # On the nats-py connection even for a broker: faststream's request wraps and parses the reply as a
        # message of its own, a tenth of the API server's CPU per write.
        msg = await connection.request(subject, data, timeout=timeout_s)
        body, headers = msg.data, msg.headers or {}
    except nats.errors.NoRespondersError as exc:
        raise RpcUnavailable("NoResponders", f"nobody serves {subject}") from exc
    except nats.errors.MaxPayloadError as exc:
        limit = connection.max_payload
        raise RpcError(
            "RequestTooLarge",
            f"the request ({len(data)} bytes) is larger than the bus carries ({limit} bytes)",
        ) from exc
    except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError) as exc:
        raise RpcUnavailable(
            "BusUnavailable", f"the NATS connection went down during {subject}; retry"
        ) from exc
    except (nats.errors.TimeoutError, TimeoutError) as exc:
        raise RpcTimeout("Timeout", f"no reply on {subject} within {timeout_s}s") from exc
    if error_type := headers.get(ERROR_HEADER):
        raise RpcError(error_type, body.decode(errors="replace"))
    return bytes(body)


def _encode(value: bytes | BaseModel) -> bytes:
    return value if isinstance(value, bytes) else value.model_dump_json().encode()
