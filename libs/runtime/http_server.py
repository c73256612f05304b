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
connection idle for `keepalive_s` is closed. A request whose head has not arrived `header_timeout_s` after
its first byte, or whose body has not arrived `body_timeout_s` after its head, is answered 408 and its
connection closed (a client that sends half a request holds nothing for long). A process holds at most
`max_connections`: one over the cap is answered 503 and closed at once, and counted. A connection has at most
`max_pipelined` requests waiting for their answers (and those of the 4 KiB slice of a read that filled the
queue): beyond, the server stops reading from it, and holds what it had read unparsed, until it has answered. `Expect: 100-continue` is answered `100 Continue`
before the body is read, or with the final answer and no reading of the body when the request is refused
from its head alone (a body over the limit, or what the handler's `check_head` refuses, e.g. a bad key); any
other expectation is 417. No TLS, no HTTP/2: a TLS-terminating proxy goes in front for those.

Time is the event loop's (`loop.call_later`): tests set tiny timeouts over real sockets instead of sleeping.
A timer is armed only for a request that a read left incomplete, so a request arriving whole costs none.
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
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 30.0
DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_MAX_PIPELINED = 16
READ_SLICE = 4096
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
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

HeadCheck = Callable[[str, str, dict[str, str]], HttpResponse | None]
"""Refuses a request from its method, path and headers alone (an answer), or lets it be read (None); called
for a request that waits for `100 Continue`, so that a refused body is never sent."""


@dataclass(slots=True)
class HttpServerStats:
    """What the server refused or cut short, for the metrics."""

    refused_connections: int = 0
    header_timeouts: int = 0
    body_timeouts: int = 0
    paused_pipelines: int = 0


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
        # A request partly read: its serial, whether its head is whole, and the timer that bounds the wait.
        self._serial = 0
        self._reading = False
        self._head_read = False
        self._read_timer: asyncio.TimerHandle | None = None
        self._read_paused = False
        self._held: list[bytes] = []
        self._continue_due = False
        self._reset_message()

    # Transport callbacks -----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses
        server = self._server
        if len(server.connections) >= server.max_connections:
            server.stats.refused_connections += 1
            self._closed = True
            self._transport.write(OVER_CONNECTION_CAP)
            self._transport.close()
            return
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
        if self._read_timer is not None:
            self._read_timer.cancel()
        if self._writable is not None and not self._writable.done():
            self._writable.set_exception(ConnectionResetError("the client went away"))
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:
            return
        if self._held:  # what came after the pause, or was left of the read that filled the queue
            self._held.append(data)
            return
        if len(data) <= READ_SLICE:
            self._feed(data)
            return
        # Fed in slices, so that the requests a big read holds stop queueing once the queue is full.
        for start in range(0, len(data), READ_SLICE):
            if self._read_paused:
                self._held.append(data[start:])
                return
            if self._refusal is not None:
                return
            self._feed(data[start : start + READ_SLICE])

    def _feed(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._ignore_upgrade(data[upgrade.args[0] :])
        except httptools.HttpParserError as exc:
            # A limit a callback enforced surfaces here wrapped in the parser's own error.
            refused = exc.__cause__ or exc.__context__
            if isinstance(refused, _Refused):
                self._refuse(refused.status, str(refused), refused.response)
            else:
                self._refuse(400, f"malformed request: {exc}")
            return
        if self._reading and self._read_timer is None:
            self._arm_read_timer()

    # Reading in bounded time -------------------------------------------------------------------------------

    def _arm_read_timer(self) -> None:
        """Bound the wait for the rest of the request a read left incomplete: its head, or its body."""
        if self._closed or self._read_paused:
            return
        server = self._server
        timeout_s = server.body_timeout_s if self._head_read else server.header_timeout_s
        self._read_timer = self._loop.call_later(
            timeout_s, self._read_timed_out, self._serial, self._head_read
        )

    def _read_timed_out(self, serial: int, head_read: bool) -> None:
        self._read_timer = None
        if not self._reading or self._refusal is not None:
            return
        if serial != self._serial or head_read != self._head_read:  # that part came: time the next one
            self._arm_read_timer()
            return
        if head_read:
            self._server.stats.body_timeouts += 1
            self._refuse(408, f"request body not received within {self._server.body_timeout_s:g} s")
        else:
            self._server.stats.header_timeouts += 1
            self._refuse(408, f"request headers not received within {self._server.header_timeout_s:g} s")

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

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
        self._serial += 1
        self._reading, self._head_read = True, False
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

    def on_headers_complete(self) -> None:
        self._head_read = True
        if self._read_timer is not None:  # the head came in time: the body gets its own time
            self._cancel_read_timer()
        expect = self._headers.get("expect")
        if expect is not None and self._continued is None:
            self._expect(expect)

    def _expect(self, expect: str) -> None:
        """Answer `Expect: 100-continue` before the body is sent, or refuse from the head alone."""
        if expect.strip().lower() != "100-continue":
            raise _Refused(417, f"Expect: {expect} is not supported (only 100-continue)")
        headers = self._headers
        length = headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > self._server.max_body_bytes:
            raise _Refused(413, f"request body over {self._server.max_body_bytes} bytes")
        check = self._server.check_head
        if check is not None:
            url = httptools.parse_url(self._url)
            method = self._parser.get_method().decode("latin-1")
            refusal = check(method, (url.path or b"/").decode("latin-1"), headers)
            if refusal is not None:
                raise _Refused(refusal.status, "refused from its head", refusal)
        if length == "0" and "transfer-encoding" not in headers:
            return
        if self.busy:  # after the answers before it: the client sends the body once it has them
            self._continue_due = True
        else:
            self._write(CONTINUE)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self._server.max_body_bytes:
            raise _Refused(413, f"request body over {self._server.max_body_bytes} bytes")
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._reading = False
        if self._read_timer is not None:
            self._cancel_read_timer()
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
        if len(self._queue) >= self._server.max_pipelined and not self._read_paused:
            self._pause_reading()
        if self._worker is None or self._worker.done():
            self._worker = self._loop.create_task(self._answer_queued())

    def _pause_reading(self) -> None:
        """Enough requests wait for their answers: read no more from this client until they are answered."""
        if self._transport is None or self._closed:
            return
        self._read_paused = True
        self._server.stats.paused_pipelines += 1
        self._cancel_read_timer()  # what is not read cannot be late
        self._transport.pause_reading()

    def _resume_reading(self) -> None:
        self._read_paused = False
        held, self._held = b"".join(self._held), []
        if held:
            self.data_received(held)
        if self._read_paused or self._transport is None or self._closed:
            return
        self._transport.resume_reading()
        if self._reading and self._read_timer is None:
            self._arm_read_timer()

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
        while await self._answer_waiting():
            pass

    async def _answer_waiting(self) -> bool:
        """Answer the requests waiting, in order; True when reading again queued more."""
        while self._queue and not self._closed:
            request, keep_alive = self._queue.popleft()
            if self._read_paused and len(self._queue) < self._server.max_pipelined // 2:
                self._resume_reading()
            self._keep_alive = keep_alive and not self._server.closing
            self._streaming, self._unsent_head = False, b""
            response = await self._answer(request)
            if self._closed:
                return False
            self._keep_alive = self._keep_alive and not self._server.closing
            if response is not None:
                with_body = request.method != "HEAD"
                self._write(encode_response(response, keep_alive=self._keep_alive, with_body=with_body))
            elif self._streaming:
                self._write(self._take_head() + b"0\r\n\r\n")
            if not self._keep_alive:
                self.close()
                return False
        if self._closed:
            return False
        if self._refusal is not None:
            self._send_refusal()
            return False
        if self._continue_due:
            self._continue_due = False
            self._write(CONTINUE)
        if self._read_paused:
            self._resume_reading()
            if self._queue or self._refusal is not None:
                return True
        if not self._reading:
            self._arm_idle()
        return False

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

    def _refuse(self, status: int, message: str, response: HttpResponse | None = None) -> None:
        """Answer a request that cannot be read (or is refused from its head), after the answers to the
        requests before it, and close: what follows it on the connection cannot be told apart from it."""
        self._reading = False
        self._cancel_read_timer()
        if response is None:
            body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
            response = HttpResponse(status, body)
        self._refusal = encode_response(response, keep_alive=False)
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
    def waiting(self) -> int:
        """Requests read and waiting for their answers (the one being answered not included)."""
        return len(self._queue)

    @property
    def busy(self) -> bool:
        return bool(self._queue) or (self._worker is not None and not self._worker.done())


class _Refused(Exception):
    def __init__(self, status: int, message: str, response: HttpResponse | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.response = response


OVER_CONNECTION_CAP = encode_response(
    HttpResponse(
        503,
        b'{"error": {"message": "too many connections to this process", "type": "server_error", '
        b'"code": "too_many_connections"}}',
        (("Retry-After", "1"),),
    ),
    keep_alive=False,
)


class HttpServer:
    """`await start(sock=...)` or `await start(host=..., port=...)`, then `await close()`."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
        header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
        body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_pipelined: int = DEFAULT_MAX_PIPELINED,
        check_head: HeadCheck | None = None,
    ) -> None:
        self.handler = handler
        self.max_body_bytes = max_body_bytes
        self.keepalive_s = keepalive_s
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.max_connections = max_connections
        self.max_pipelined = max(1, max_pipelined)
        self.check_head = check_head
        self.stats = HttpServerStats()
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
