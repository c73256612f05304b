"""The providers' keep-alive client: connections reused, chunked answers read whole, and an answer cut short
or a call cancelled never leaves a half-read connection in the pool."""

from __future__ import annotations

import asyncio

import pytest

from libs.providers.http_pool import AnswerCutShort, HttpPool
from libs.runtime.http_server import HttpRequest, HttpResponse, HttpServer

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
