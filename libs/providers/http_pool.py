"""A lean keep-alive HTTP/1.1 client for the providers' whole-answer calls (Converse, generateContent).

Why not aiohttp's client for these: a call to an endpoint answering at once costs the router more in
aiohttp's request, connector and response objects than in everything else it does for the request. Here a
request is one `write` of bytes built in one go, the answer is parsed by llhttp (`httptools`) as it arrives,
and a connection goes back to its pool when its answer is whole and the server keeps it alive. TLS is
asyncio's. A streamed answer (ConverseStream, streamGenerateContent) hands on its body as it arrives, and
stops reading from the socket while its reader is `MAX_UNREAD_CHUNKS` behind.

Failures are `ConnectionError`s (refused, reset, closed before the answer was whole, or an answer that is not
HTTP); a call cancelled (the router's deadline) closes its connection, which is never reused half-read.

A kept-alive connection idle for `idle_timeout_s` is closed rather than reused (servers and load balancers
close theirs after a minute or so, often without a word). A connection the peer closed while it sat in the
pool is found out only when used: the write fails, or the answer ends before its first byte. The call is then
sent once more, on a fresh connection: the peer never read it, and a stale socket says nothing of the
deployment's health, so the router's breaker never hears of it. A fresh connection that fails is a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A whole answer: status, headers (names lower-case) and body."""

    status: int
    headers: dict[str, str]
    body: bytes


class AnswerCutShort(ConnectionError):
    """The connection ended, or the answer was not HTTP, before the answer was whole."""


class StaleConnection(AnswerCutShort):
    """A pooled connection the peer had closed: the request could not be written, or the connection ended
    before any byte of the answer."""


MAX_UNREAD_CHUNKS = 64
DEFAULT_IDLE_TIMEOUT_S = 30.0


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[HttpAnswer] | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self.keep_alive = True
        # A streamed answer: its head, its unread body chunks, whether it is whole, who waits for more.
        self._head: asyncio.Future[tuple[int, dict[str, str]]] | None = None
        self._unread: deque[bytes] = deque()
        self.whole = False
        self._more: asyncio.Future[None] | None = None
        self._paused = False
        self.reused = False  # taken from the pool: it may have gone stale there
        self.answered = False  # a byte of the current answer arrived
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        error = StaleConnection if self.reused and not self.answered else AnswerCutShort
        self._fail(error(f"the connection closed before the answer was whole ({exc or 'EOF'})"))
        self._wake()

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(AnswerCutShort(f"the answer is not HTTP: {exc}"))
            self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self._head is not None and not self._head.done():
            self._head.set_result((self._parser.get_status_code(), self._headers))

    def on_body(self, body: bytes) -> None:
        if self._head is None:
            self._body.append(body)
            return
        self._unread.append(body)
        if len(self._unread) >= MAX_UNREAD_CHUNKS and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.keep_alive = self._parser.should_keep_alive()
        self.whole = True
        if self._head is not None:
            self._wake()
            return
        answer = HttpAnswer(self._parser.get_status_code(), self._headers, b"".join(self._body))
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(answer)

    def _fail(self, error: Exception) -> None:
        for waiter in (self._answer, self._head):
            if waiter is not None and not waiter.done():
                waiter.set_exception(error)

    def _wake(self) -> None:
        if self._more is not None and not self._more.done():
            self._more.set_result(None)

    def _send(self, request: bytes) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise (StaleConnection if self.reused else AnswerCutShort)("the connection is closed")
        self.answered = False
        try:
            self.transport.write(request)
        except (ConnectionError, RuntimeError) as exc:  # a socket the peer reset, found out on write
            raise (StaleConnection if self.reused else AnswerCutShort)(f"write failed: {exc}") from exc

    async def start_stream(self, request: bytes) -> tuple[int, dict[str, str]]:
        """Send `request`; the answer's status and headers once they arrive (the body is `next_chunk`'s)."""
        self._headers, self._unread, self.whole = {}, deque(), False
        self._head = asyncio.get_running_loop().create_future()
        self._send(request)
        return await self._head

    async def next_chunk(self) -> bytes | None:
        """The next piece of a streamed body as it arrived, or None once the body is whole."""
        while not self._unread:
            if self.whole:
                return None
            if self.closed:
                raise AnswerCutShort("the connection closed before the answer was whole")
            self._more = asyncio.get_running_loop().create_future()
            await self._more
        chunk = self._unread.popleft()
        if self._paused and len(self._unread) < MAX_UNREAD_CHUNKS // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return chunk

    async def exchange(self, request: bytes) -> HttpAnswer:
        self._head = None
        self._headers, self._body = {}, []
        self._answer = asyncio.get_running_loop().create_future()
        self._send(request)
        return await self._answer

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class StreamedAnswer:
    """An answer whose body is read as it arrives."""

    def __init__(self, status: int, headers: dict[str, str], connection: _Connection) -> None:
        self.status = status
        self.headers = headers
        self._connection = connection

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's pieces as they arrive (chunked encoding already undone)."""
        while (chunk := await self._connection.next_chunk()) is not None:
            yield chunk

    async def read(self) -> bytes:
        """The rest of the body, whole."""
        return b"".join([chunk async for chunk in self.chunks()])


class HttpPool:
    """POSTs to one origin (`https://host:port`) over at most `max_connections` kept-alive connections."""

    def __init__(
        self,
        origin: str,
        *,
        max_connections: int = 256,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parts = urlsplit(origin)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._tls else 80)
        self._host_header = parts.netloc
        self._ssl = ssl.create_default_context() if self._tls else None
        self._idle: deque[_Connection] = deque()  # the most recently used on the right
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False
        self._idle_timeout_s = idle_timeout_s
        self._clock = clock
        self.stale_retries = 0
        """Calls sent again because their pooled connection had gone stale."""
        self.opened = 0
        """Connections opened."""

    async def post(self, target: str, body: bytes, headers: Mapping[str, str]) -> HttpAnswer:
        """POST `body` to `target` (path and query, already encoded); raises ConnectionError or OSError."""
        request = self._request(target, body, headers)
        async with self._slots:
            connection = await self._connection()
            try:
                answer = await connection.exchange(request)
            except StaleConnection:
                connection.close()
                self.stale_retries += 1
                connection = await self._connection(fresh=True)
                try:
                    answer = await connection.exchange(request)
                except BaseException:
                    connection.close()
                    raise
            except BaseException:
                connection.close()
                raise
            self._release(connection)
            return answer

    @contextlib.asynccontextmanager
    async def stream(
        self, target: str, body: bytes, headers: Mapping[str, str]
    ) -> AsyncIterator[StreamedAnswer]:
        """POST, and read the answer's body as it arrives; leaving the block early closes the connection."""
        request = self._request(target, body, headers)
        async with self._slots:
            connection = await self._connection()
            try:
                try:
                    status, answer_headers = await connection.start_stream(request)
                except StaleConnection:
                    connection.close()
                    self.stale_retries += 1
                    connection = await self._connection(fresh=True)
                    status, answer_headers = await connection.start_stream(request)
                yield StreamedAnswer(status, answer_headers, connection)
            except BaseException:
                connection.close()
                raise
            if connection.whole:
                self._release(connection)
            else:
                connection.close()

    def _request(self, target: str, body: bytes, headers: Mapping[str, str]) -> bytes:
        lines = [f"POST {target} HTTP/1.1", f"Content-Length: {len(body)}"]
        if not any(name.lower() == "host" for name in headers):
            lines.append(f"Host: {self._host_header}")
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def _release(self, connection: _Connection) -> None:
        if connection.keep_alive and not connection.closed and not self._closed:
            now = self._clock()
            connection.idle_since = now
            self._idle.append(connection)
            self._expire(now)
        else:
            connection.close()

    def _expire(self, now: float) -> None:
        """Close the connections idle longer than the timeout (the oldest are on the left)."""
        idle = self._idle
        while idle and (idle[0].closed or now - idle[0].idle_since > self._idle_timeout_s):
            idle.popleft().close()

    async def _connection(self, *, fresh: bool = False) -> _Connection:
        if not fresh:
            self._expire(self._clock())
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    connection.reused = True
                    return connection
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            _Connection,
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._host if self._tls else None,
        )
        self.opened += 1
        return connection

    @property
    def idle_connections(self) -> int:
        """Connections kept alive and waiting for a call."""
        return len(self._idle)

    async def aclose(self) -> None:
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()
