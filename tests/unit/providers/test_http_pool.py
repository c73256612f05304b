"""The providers' keep-alive client: connections reused, chunked answers read whole, and an answer cut short
or a call cancelled never leaves a half-read connection in the pool."""

from __future__ import annotations

import asyncio

import pytest

from libs.providers.http_pool import AnswerCutShort, HttpPool, StaleConnection
from libs.runtime.http_server import HttpRequest, HttpResponse, HttpServer
from tests.support import eventually

ON_BOTH_EVENT_LOOPS = True  # the router runs on uvloop


class Upstream:
    """An endpoint that counts its connections and answers as told by the path."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.hanging = asyncio.Event()

    async def __call__(self, request: HttpRequest) -> HttpResponse | None:
        if request.path == "/chunked":
            stream = await request.stream(200, [("Content-Type", "application/json")])
            await stream.write(b'{"text": ')
            await stream.write(b'"whole"}')
            return None
        if request.path == "/events":
            stream = await request.stream(200, [("Content-Type", "text/event-stream")])
            for n in range(3):
                await stream.write(b"data: %d\n\n" % n)
                await self.release.wait()  # each piece leaves before the next is written
            return None
        if request.path == "/hang":
            self.hanging.set()
            await self.release.wait()
        body = b'{"path": "%s", "auth": "%s", "size": %d}' % (
            request.path.encode(),
            request.headers.get("authorization", "").encode(),
            len(request.body),
        )
        return HttpResponse(429 if request.path == "/busy" else 200, body, [("x-amzn-ErrorType", "Busy")])


async def start(upstream: Upstream) -> tuple[HttpServer, str]:
    server = HttpServer(upstream)
    host, port = await server.start(host="127.0.0.1", port=0)
    return server, f"http://{host}:{port}"


async def test_calls_reuse_one_kept_alive_connection_and_carry_headers_and_body():
    server, origin = await start(Upstream())
    pool = HttpPool(origin)
    try:
        for _ in range(3):
            answer = await pool.post("/model/x/converse", b"12345", {"Authorization": "sig"})
            assert answer.status == 200
            assert answer.body == b'{"path": "/model/x/converse", "auth": "sig", "size": 5}'
        assert len(server.connections) == 1
        busy = await pool.post("/busy", b"", {})
        assert (busy.status, busy.headers["x-amzn-errortype"]) == (429, "Busy")
    finally:
        await pool.aclose()
        await server.close()


async def test_a_chunked_answer_is_read_whole():
    server, origin = await start(Upstream())
    pool = HttpPool(origin)
    try:
        assert (await pool.post("/chunked", b"", {})).body == b'{"text": "whole"}'
    finally:
        await pool.aclose()
        await server.close()


async def test_a_cancelled_call_closes_its_connection_and_the_next_call_opens_another():
    upstream = Upstream()
    server, origin = await start(upstream)
    pool = HttpPool(origin)
    try:
        call = asyncio.create_task(pool.post("/hang", b"", {}))
        await asyncio.wait_for(upstream.hanging.wait(), 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        upstream.release.set()
        assert (await pool.post("/after", b"", {})).status == 200
        assert pool.idle_connections == 1
    finally:
        await pool.aclose()
        await server.close()


async def test_an_answer_cut_short_is_a_connection_error():
    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut_short, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = HttpPool(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(AnswerCutShort):
            await pool.post("/", b"", {})
        assert pool.idle_connections == 0
    finally:
        await pool.aclose()
        server.close()


async def test_a_refused_connection_is_an_os_error():
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(OSError):
        await HttpPool(f"http://127.0.0.1:{port}").post("/", b"", {})


async def test_a_streamed_answer_hands_on_each_piece_before_the_next_is_written():
    upstream = Upstream()
    server, origin = await start(upstream)
    pool = HttpPool(origin)
    try:
        async with pool.stream("/events", b"", {}) as answer:
            assert answer.status == 200
            chunks = answer.chunks()
            assert await anext(chunks) == b"data: 0\n\n"
            upstream.release.set()
            assert [chunk async for chunk in chunks] == [b"data: 1\n\n", b"data: 2\n\n"]
        assert pool.idle_connections == 1, "a stream read to its end leaves its connection for the next call"
        assert (await pool.post("/after", b"", {})).status == 200
        assert len(server.connections) == 1
    finally:
        await pool.aclose()
        await server.close()


async def test_leaving_a_stream_early_closes_its_connection():
    upstream = Upstream()
    server, origin = await start(upstream)
    pool = HttpPool(origin)
    try:
        async with pool.stream("/events", b"", {}) as answer:
            assert await anext(answer.chunks()) == b"data: 0\n\n"
        assert pool.idle_connections == 0, "a half-read connection is never reused"
        upstream.release.set()
    finally:
        await pool.aclose()
        await server.close()


class ClosingPeer:
    """A raw endpoint whose connections answer `answers` requests kept alive, then close on the next one
    without a byte of answer: what a peer that closed the connection while it sat idle looks like to the
    client that sends on it."""

    def __init__(self, answers: list[int]) -> None:
        self._answers = answers  # per connection, in the order they open
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answers = self._answers[self.connections] if self.connections < len(self._answers) else 0
        self.connections += 1
        for _ in range(answers):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    async def origin(self) -> str:
        self.server = await asyncio.start_server(self, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def close(self) -> None:
        assert self.server is not None
        self.server.close()


async def test_a_call_on_a_connection_the_peer_closed_is_sent_once_more_on_a_fresh_one():
    peer = ClosingPeer([1, 1])
    pool = HttpPool(await peer.origin())
    try:
        assert (await pool.post("/", b"{}", {})).body == b"ok"
        assert pool.idle_connections == 1
        answer = await pool.post("/", b"{}", {})
    finally:
        await pool.aclose()
        peer.close()
    assert answer.body == b"ok", "the caller never sees the stale socket"
    assert (pool.stale_retries, pool.opened, peer.connections) == (1, 2, 2)


async def test_a_stream_on_a_connection_the_peer_closed_is_sent_once_more_on_a_fresh_one():
    peer = ClosingPeer([1, 1])
    pool = HttpPool(await peer.origin())
    try:
        await pool.post("/", b"{}", {})
        async with pool.stream("/", b"{}", {}) as answer:
            body = await answer.read()
    finally:
        await pool.aclose()
        peer.close()
    assert (answer.status, body) == (200, b"ok")
    assert pool.stale_retries == 1


async def test_a_fresh_connection_that_fails_is_a_failure_and_not_retried_again():
    peer = ClosingPeer([1, 0, 0])
    pool = HttpPool(await peer.origin())
    try:
        await pool.post("/", b"{}", {})
        with pytest.raises(AnswerCutShort) as caught:
            await pool.post("/", b"{}", {})
        with pytest.raises(AnswerCutShort) as first_call:
            await HttpPool(await peer.origin()).post("/", b"{}", {})
    finally:
        await pool.aclose()
        peer.close()
    assert not isinstance(caught.value, StaleConnection), "a fresh connection's failure is a real one"
    assert not isinstance(first_call.value, StaleConnection)
    assert pool.stale_retries == 1


async def test_a_connection_idle_longer_than_the_timeout_is_closed_instead_of_reused():
    now = [1000.0]
    server, origin = await start(Upstream())
    pool = HttpPool(origin, idle_timeout_s=30.0, clock=lambda: now[0])
    try:
        await pool.post("/first", b"", {})
        now[0] += 29.0
        await pool.post("/within", b"", {})
        assert pool.opened == 1, "idle under the timeout: reused"
        now[0] += 31.0
        await pool.post("/after", b"", {})
        assert pool.opened == 2, "idle over the timeout: a new connection"
        assert pool.idle_connections == 1, "the expired one is closed, not kept"
        await eventually(lambda: _count(server), lambda n: n == 1)
        assert len(server.connections) == 1
    finally:
        await pool.aclose()
        await server.close()


async def _count(server: HttpServer) -> int:
    return len(server.connections)
