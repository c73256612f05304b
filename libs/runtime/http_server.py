"""A lean HTTP/1.1 server on an asyncio protocol, for fronts whose own work is a fraction of a millisecond.

Why not aiohttp's web server: the router's front answers a request in about 0.1 ms of its own work, and
aiohttp's request, middleware, routing and response objects cost several times that on every request. This
server parses with llhttp (`httptools`, the parser uvicorn uses), hands the handler a plain `HttpRequest`,
and writes each answer in one `write`. It speaks what OpenAI clients and Prometheus scrapers need:
keep-alive and pipelined requests (answered in order, a request that cannot be read included), `Content-Length`
and chunked request bodies, `Connection: close`, answers with a body (none to a HEAD), and streamed answers
(chunked, for SSE) with flow control. A request asking for a protocol upgrade (`Upgrade: h2c`, `websocket`) is
answered in HTTP/1.1 as if it had not asked, which RFC 9110 (7.8) lets a server do.

Limits: a request's headers may take `MAX_HEADER_BYTES`, its body `max_body_bytes` (413 beyond); a
connection idle for `keepalive_s` is closed. No TLS, no HTTP/2, no `Expect: 100-continue` (clients send
the body anyway after a short wait); a TLS-terminating proxy goes in front for those.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import cast

import httptools

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_KEEPALIVE_S = 75.0
Headers = Sequence[tuple[str, str]]


@dataclass(slots=True)
class HttpRequest:
    """One request: header names are lower-case; `body` is whole."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes = b""
    _connection: HttpConnection | None = field(default=None, repr=False)

    @property
    def streaming(self) -> bool:
        """Whether the answer's head is out (a streamed answer has started)."""
        return self._connection is not None and self._connection.streaming

    async def stream(self, status: int, headers: Headers) -> ResponseStream:
        """Start a streamed answer (chunked); the handler then writes to it and returns."""
        assert self._connection is not None
        return await self._connection.start_stream(status, headers)


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A whole answer."""

    status: int
    body: bytes = b""
    headers: Headers = ()
    content_type: str = "application/json"


Handler = Callable[[HttpRequest], Awaitable[HttpResponse | None]]
"""Answers a request: a response, or None when it streamed its answer through `request.stream`."""


class ResponseStream:
    """A chunked answer in progress; `write` waits while the client reads slowly."""

    def __init__(self, connection: HttpConnection) -> None:
        self._connection = connection

    async def write(self, data: bytes) -> None:
        if data:
            await self._connection.send(b"%x\r\n%b\r\n" % (len(data), data))


def _head(status: int, headers: Headers, extra: str) -> bytes:
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode("latin-1")


def encode_response(response: HttpResponse, *, keep_alive: bool, with_body: bool = True) -> bytes:
    """The bytes of a whole answer; without its body for a HEAD (the head still says how long it is)."""
    extra = f"Content-Type: {response.content_type}\r\nContent-Length: {len(response.body)}\r\n"
    if not keep_alive:
        extra += "Connection: close\r\n"
    head = _head(response.status, response.headers, extra)
    return head + response.body if with_body else head


class HttpConnection(asyncio.Protocol):
    """One client connection: parses requests, runs the handler for each in turn, writes the answers."""

    def __init__(self, server: HttpServer) -> None:
        self._server = server
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._queue: deque[tuple[HttpRequest, bool]] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._closed = False
        self._idle: asyncio.TimerHandle | None = None
        self._keep_alive = True
        self._streaming = False
        self._unsent_head = b""
        # An upgrade request whose body a fresh parser is reading, and an answer to send once those before it are
        # out (a request that could not be read; nothing after it on the connection is read).
        self._continued: tuple[HttpRequest, bool] | None = None
        self._refusal: bytes | None = None
        self._reset_message()

    # Transport callbacks -----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._server.connections.add(self)
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._server.connections.discard(self)
        if self._idle is not None:
            self._idle.cancel()
        if self._writable is not None and not self._writable.done():
            self._writable.set_exception(ConnectionResetError("the client went away"))
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._ignore_upgrade(data[upgrade.args[0] :])
        except httptools.HttpParserError as exc:
            # A limit a callback enforced surfaces here wrapped in the parser's own error.
            refused = exc.__cause__ or exc.__context__
            if isinstance(refused, _Refused):
                self._refuse(refused.status, str(refused))
            else:
                self._refuse(400, f"malformed request: {exc}")

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # Parser callbacks --------------------------------------------------------------------------------------

    def _reset_message(self) -> None:
        self._url = b""
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._body_bytes = 0

    def on_message_begin(self) -> None:
        self._reset_message()
        if self._idle is not None:
            self._idle.cancel()

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count_header_bytes(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_header_bytes(len(name) + len(value))
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self._server.max_body_bytes:
            raise _Refused(413, f"request body over {self._server.max_body_bytes} bytes")
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._continued is not None:  # the body of an upgrade request, read by a fresh parser
            (request, keep_alive), self._continued = self._continued, None
            request.body = b"".join(self._body)
        else:
            url = httptools.parse_url(self._url)
            request = HttpRequest(
                method=self._parser.get_method().decode("latin-1"),
                path=(url.path or b"/").decode("latin-1"),
                query=(url.query or b"").decode("latin-1"),
                headers=self._headers,
                body=b"".join(self._body),
                _connection=self,
            )
            keep_alive = self._parser.should_keep_alive()
        self._queue.append((request, keep_alive))
        if self._worker is None or self._worker.done():
            self._worker = self._loop.create_task(self._answer_queued())

    def _ignore_upgrade(self, rest: bytes) -> None:
        """Go on in HTTP/1.1. llhttp ends an upgrade request at its head (it was queued with no body) and takes
        the rest for the new protocol, so a fresh parser reads on: the request's body first, if it has one, through
        a head that gives only its framing, then the requests after it."""
        self._parser = httptools.HttpRequestParser(self)
        request, keep_alive = self._queue[-1]
        headers = request.headers
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length", "0").strip()
        if chunked or length != "0":
            self._queue.pop()  # not answered yet: its worker runs after this callback
            self._continued = (request, keep_alive)
            framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
            rest = f"{request.method} / HTTP/1.1\r\n{framing}\r\n\r\n".encode("latin-1") + rest
        if rest:
            self.data_received(rest)

    def _count_header_bytes(self, count: int) -> None:
        self._header_bytes += count
        if self._header_bytes > MAX_HEADER_BYTES:
            raise _Refused(431, "request headers too large")

    # Answering ---------------------------------------------------------------------------------------------

    async def _answer_queued(self) -> None:
        while self._queue and not self._closed:
            request, keep_alive = self._queue.popleft()
            self._keep_alive = keep_alive and not self._server.closing
            self._streaming, self._unsent_head = False, b""
            response = await self._answer(request)
            if self._closed:
                return
            self._keep_alive = self._keep_alive and not self._server.closing
            if response is not None:
                with_body = request.method != "HEAD"
                self._write(encode_response(response, keep_alive=self._keep_alive, with_body=with_body))
            elif self._streaming:
                self._write(self._take_head() + b"0\r\n\r\n")
            if not self._keep_alive:
                self.close()
                return
        if self._refusal is not None:
            self._send_refusal()
            return
        self._arm_idle()

    async def _answer(self, request: HttpRequest) -> HttpResponse | None:
        try:
            response = await self._server.handler(request)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            if self._streaming and not self._unsent_head:  # the head is out: end the connection without
                self.close()  # the last chunk, so the client sees an answer cut short, not a complete one
                return None
            self._streaming, self._unsent_head = False, b""
            return HttpResponse(500, b'{"error": {"message": "internal error", "type": "server_error"}}')
        if response is None and not self._streaming:
            raise RuntimeError(f"the handler of {request.path} neither answered nor streamed")
        return response

    async def start_stream(self, status: int, headers: Headers) -> ResponseStream:
        """The head goes out with the first chunk: one write, one wake-up of the client, for both."""
        extra = "Transfer-Encoding: chunked\r\n" + ("" if self._keep_alive else "Connection: close\r\n")
        self._streaming = True
        self._unsent_head = _head(status, headers, extra)
        return ResponseStream(self)

    async def send(self, data: bytes) -> None:
        """Write (after the head, if it is not out yet), then wait while the transport's buffer is over its
        high-water mark."""
        if self._closed:
            raise ConnectionResetError("the client went away")
        self._write(self._take_head() + data)
        if self._writable is not None and not self._writable.done():
            await self._writable

    def _take_head(self) -> bytes:
        head, self._unsent_head = self._unsent_head, b""
        return head

    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._closed:
            self._transport.write(data)

    def _refuse(self, status: int, message: str) -> None:
        """Answer a request that cannot be read, after the answers to the requests before it, and close: what
        follows it on the connection cannot be told apart from it."""
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
        self._refusal = encode_response(HttpResponse(status, body), keep_alive=False)
        if not self.busy:
            self._send_refusal()

    def _send_refusal(self) -> None:
        if self._refusal is not None:
            self._write(self._refusal)
        self.close()

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._closed = True
            self._transport.close()

    def _arm_idle(self) -> None:
        if self._closed:
            return
        if self._server.closing:
            self.close()
            return
        if self._idle is not None:
            self._idle.cancel()
        self._idle = self._loop.call_later(self._server.keepalive_s, self._close_if_idle)

    def _close_if_idle(self) -> None:
        if not self.busy:
            self.close()

    @property
    def streaming(self) -> bool:
        return self._streaming

    @property
    def worker(self) -> asyncio.Task[None] | None:
        """The task answering this connection's requests, if any."""
        return self._worker

    @property
    def busy(self) -> bool:
        return bool(self._queue) or (self._worker is not None and not self._worker.done())


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class HttpServer:
    """`await start(sock=...)` or `await start(host=..., port=...)`, then `await close()`."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
    ) -> None:
        self.handler = handler
        self.max_body_bytes = max_body_bytes
        self.keepalive_s = keepalive_s
        self.connections: set[HttpConnection] = set()
        self.closing = False
        self._server: asyncio.Server | None = None

    async def start(
        self,
        *,
        sock: socket.socket | None = None,
        host: str | None = None,
        port: int = 0,
        reuse_port: bool = False,
    ) -> tuple[str, int]:
        """Listen on `sock`, or on `host`:`port`; returns the address bound."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await loop.create_server(lambda: HttpConnection(self), sock=sock, backlog=1024)
        else:
            self._server = await loop.create_server(
                lambda: HttpConnection(self), host, port, backlog=1024, reuse_port=reuse_port or None
            )
        address = self._server.sockets[0].getsockname()
        return address[0], address[1]

    async def close(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let the requests in progress finish (up to `grace_s`), close every connection."""
        self.closing = True
        if self._server is not None:
            self._server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        answering = [c.worker for c in self.connections if c.worker is not None and not c.worker.done()]
        if answering:
            await asyncio.wait(answering, timeout=grace_s)
        for connection in list(self.connections):
            connection.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), max(0.0, deadline - loop.time()) + 0.1)
