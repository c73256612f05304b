"""Request/reply where one request may be answered by several messages (the router's streamed answers).

Server side: a core-NATS queue subscription that runs each request in its own task (faststream's core
subscriber handles one message at a time, which would serialise slow requests) and lets the handler publish
any number of messages to the request's reply inbox. Client side: send the request with a fresh inbox and read
the replies until one whose frame header says it is the last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field

import nats.errors
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from libs.messaging.rpc import RpcTimeout, RpcUnavailable

log = logging.getLogger(__name__)

STATUS_HEADER = "Status"
NO_RESPONDERS = "503"


def _client(connection: Client | NatsBroker) -> Client:
    return connection.connection if isinstance(connection, NatsBroker) else connection


@dataclass(frozen=True, slots=True)
class Reply:
    """One message of an answer."""

    data: bytes
    headers: dict[str, str]


class IncomingRequest:
    """A request being served: its body and headers, and a way to answer it any number of times."""

    __slots__ = ("_client", "_reply_to", "data", "headers")

    def __init__(self, client: Client, msg: Msg) -> None:
        self._client = client
        self._reply_to = msg.reply
        self.data = msg.data
        self.headers = dict(msg.headers or {})

    @property
    def wants_reply(self) -> bool:
        """False for a plain publish (fire and forget)."""
        return bool(self._reply_to)

    async def send(self, data: bytes, headers: dict[str, str] | None = None) -> None:
        """Publish one reply message to the caller's inbox (nothing when the caller asked for none)."""
        if self._reply_to:
            await self._client.publish(self._reply_to, data, headers=headers)


RequestHandler = Callable[[IncomingRequest], Awaitable[None]]


@dataclass
class RequestServer:
    """A running subscription; `close()` stops taking requests and waits for those in progress."""

    subscription: Subscription
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def close(self, grace_s: float = 5.0) -> None:
        with contextlib.suppress(nats.errors.Error):
            await self.subscription.unsubscribe()
        if not self.tasks:
            return
        _, pending = await asyncio.wait(set(self.tasks), timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def serve_requests(
    connection: Client | NatsBroker, subject: str, handler: RequestHandler, *, queue: str
) -> RequestServer:
    """Serve `subject` in queue group `queue` on a connected client; each request runs in its own task. With
    `queue=""` every server of `subject` gets every request (a fleet-wide question: `gather_replies`).

    A handler exception is logged; the handler is responsible for telling the caller (it knows the framing).
    """
    client = _client(connection)
    server: RequestServer

    async def run(msg: Msg) -> None:
        try:
            await handler(IncomingRequest(client, msg))
        except Exception:
            log.exception("request on %s failed", subject)

    async def on_message(msg: Msg) -> None:
        task = asyncio.get_running_loop().create_task(run(msg))
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)

    server = RequestServer(await client.subscribe(subject, queue=queue, cb=on_message))
    return server


async def stream_request(
    connection: Client | NatsBroker,
    subject: str,
    data: bytes,
    *,
    frame_header: str,
    last_frames: Collection[str],
    idle_timeout_s: float,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Reply]:
    """Send a request and yield its replies until one whose `frame_header` is in `last_frames` (included).

    Raises RpcUnavailable when nobody serves `subject`, and RpcTimeout when no reply arrives for
    `idle_timeout_s`: a stream that stops without its last frame is an error, never a clean end.
    """
    client = _client(connection)
    inbox = client.new_inbox()
    subscription = await client.subscribe(inbox)
    try:
        await client.publish(subject, data, reply=inbox, headers=headers)
        while True:
            try:
                msg = await subscription.next_msg(timeout=idle_timeout_s)
            except (nats.errors.TimeoutError, TimeoutError) as exc:
                raise RpcTimeout("Timeout", f"no reply on {subject} within {idle_timeout_s}s") from exc
            reply_headers = dict(msg.headers or {})
            if not msg.data and reply_headers.get(STATUS_HEADER) == NO_RESPONDERS:
                raise RpcUnavailable("NoResponders", f"nobody serves {subject}")
            yield Reply(msg.data, reply_headers)
            if reply_headers.get(frame_header) in last_frames:
                return
    finally:
        with contextlib.suppress(nats.errors.Error):
            await subscription.unsubscribe()


async def gather_replies(
    connection: Client | NatsBroker, subject: str, data: bytes, *, timeout_s: float, quiet_s: float
) -> list[Reply]:
    """Ask every server of `subject` (served with no queue group): the replies that come until `quiet_s`
    passes without one, after the first; at most `timeout_s` in all.

    Raises RpcUnavailable when nobody serves `subject`, and RpcTimeout when no reply arrives in `timeout_s`.
    """
    client = _client(connection)
    inbox = client.new_inbox()
    subscription = await client.subscribe(inbox)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    replies: list[Reply] = []
    try:
        await client.publish(subject, data, reply=inbox)
        while (left := deadline - loop.time()) > 0:
            try:
                msg = await subscription.next_msg(timeout=min(left, quiet_s) if replies else left)
            except (nats.errors.TimeoutError, TimeoutError):
                break
            headers = dict(msg.headers or {})
            if not msg.data and headers.get(STATUS_HEADER) == NO_RESPONDERS:
                raise RpcUnavailable("NoResponders", f"nobody serves {subject}")
            replies.append(Reply(msg.data, headers))
    finally:
        with contextlib.suppress(nats.errors.Error):
            await subscription.unsubscribe()
    if not replies:
        raise RpcTimeout("Timeout", f"no reply on {subject} within {timeout_s}s")
    return replies


async def publish(
    connection: Client | NatsBroker, subject: str, data: bytes, *, headers: dict[str, str] | None = None
) -> None:
    """Fire and forget on core NATS."""
    client = _client(connection)
    await client.publish(subject, data, headers=headers)
    await client.flush()
