"""The lean HTTP/1.1 server: keep-alive and pipelining in order, chunked bodies both ways, limits, and errors
that answer or close instead of hanging."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from libs.runtime.http_server import HttpRequest, HttpResponse, HttpServer
from tests.support import eventually

ON_BOTH_EVENT_LOOPS = True  # the router runs on uvloop


async def handler(request: HttpRequest) -> HttpResponse | None:
    if request.path == "/boom":
        raise RuntimeError("boom")
    if request.path == "/stream":
        stream = await request.stream(200, [("Content-Type", "text/event-stream")])
        for word in (b"alpha", b"bravo"):
            await stream.write(b"data: " + word + b"\n\n")
        return None
    if request.path == "/stream-nothing":
        await request.stream(200, [("Content-Type", "text/event-stream")])
        return None
    if request.path == "/stream-then-boom":
        await request.stream(200, [("Content-Type", "text/event-stream")])
        raise RuntimeError("failed before the first chunk")
    if request.path == "/stream-boom-later":
        stream = await request.stream(200, [("Content-Type", "text/event-stream")])
        await stream.write(b"data: alpha\n\n")
        raise RuntimeError("failed after the first chunk")
    if request.path == "/slow":
        await asyncio.sleep(0.01)
    body = f"{request.method} {request.path}?{request.query} {len(request.body)}".encode()
    return HttpResponse(200, body, [("X-Echo", request.headers.get("x-echo", ""))], content_type="text/plain")


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, int]]:
    http = HttpServer(handler, max_body_bytes=1024)
    address = await http.start(host="127.0.0.1", port=0)
    yield address
    await http.close()


async def exchange(address: tuple[str, int], raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*address)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)  # until the server closes
    writer.close()
    return data


async def test_pipelined_requests_are_answered_in_order_on_one_connection(server):
    raw = (
        b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        b"GET /fast?q=1 HTTP/1.1\r\nHost: x\r\nX-Echo: yes\r\n\r\n"
        b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    data = await exchange(server, raw)
    assert data.count(b"HTTP/1.1 200 OK") == 3
    first, second, third = (data.index(b) for b in (b"POST /slow? 3", b"GET /fast?q=1 0", b"GET /last? 0"))
    assert first < second < third, "answers keep the order of the requests"
    assert b"X-Echo: yes" in data
    assert data.count(b"Connection: close") == 1


async def test_a_chunked_request_body_is_read_whole(server):
    raw = (
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
    )
    assert b"POST /echo? 7" in await exchange(server, raw)


async def test_a_streamed_answer_is_chunked_and_terminated(server):
    data = await exchange(server, b"GET /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert body == b"d\r\ndata: alpha\n\n\r\nd\r\ndata: bravo\n\n\r\n0\r\n\r\n"


async def test_a_stream_that_writes_nothing_is_a_whole_empty_answer(server):
    data = await exchange(server, b"GET /stream-nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert body == b"0\r\n\r\n"


async def test_a_stream_that_fails_before_its_first_chunk_is_still_a_500(server):
    """The head waits for the first chunk, so nothing is out yet and the answer can still be an error."""
    raw = b"GET /stream-then-boom HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    data = await exchange(server, raw)
    assert data.startswith(b"HTTP/1.1 500 ")
    assert b"text/event-stream" not in data
    assert b"GET /after? 0" in data


async def test_a_stream_that_fails_after_its_first_chunk_is_cut_short(server):
    raw = b"GET /stream-boom-later HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n"
    data = await exchange(server, raw)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert body == b"d\r\ndata: alpha\n\n\r\n", "no last chunk: the client sees an answer cut short"
    assert b"/after" not in data


async def test_a_body_over_the_limit_is_413_and_the_connection_closes(server):
    raw = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\n\r\n" + b"x" * 2048
    data = await exchange(server, raw)
    assert data.startswith(b"HTTP/1.1 413 ")
    assert b"Connection: close" in data


async def test_a_malformed_request_is_400_and_the_connection_closes(server):
    data = await exchange(server, b"NOT HTTP AT ALL\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400 ")


async def test_a_failing_handler_answers_500_and_the_connection_serves_on(server):
    raw = b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    data = await exchange(server, raw)
    assert data.startswith(b"HTTP/1.1 500 ")
    assert b"GET /after? 0" in data


async def test_closing_lets_a_request_in_progress_finish():
    started = asyncio.Event()
    release = asyncio.Event()

    async def waiting(request: HttpRequest) -> HttpResponse:
        started.set()
        await release.wait()
        return HttpResponse(200, b"done", content_type="text/plain")

    http = HttpServer(waiting)
    address = await http.start(host="127.0.0.1", port=0)
    answer = asyncio.create_task(exchange(address, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    await asyncio.wait_for(started.wait(), 10)
    closing = asyncio.create_task(http.close(grace_s=30))
    await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(closing, 10)
    data = await asyncio.wait_for(answer, 10)
    assert data.endswith(b"done")
    assert b"Connection: close" in data, "a server closing does not keep the connection alive"


async def test_a_head_answer_has_its_headers_and_no_body(server):
    """A body after a HEAD answer would be read as the start of the next answer on a kept-alive connection."""
    raw = (
        b"HEAD /first HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    data = await exchange(server, raw)
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert b"Content-Length: 14" in head, "how long its body would have been"
    assert rest.startswith(b"HTTP/1.1 200 "), "the next answer follows the head at once"
    assert rest.endswith(b"GET /after? 0")


async def test_an_upgrade_to_h2c_is_ignored_and_answered_in_http_1_1(server):
    upgrade = (
        b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
    )
    raw = (
        b"GET /first HTTP/1.1\r\nHost: x\r\n" + upgrade + b"\r\n"
        b"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n" + upgrade + b"\r\nabc"
        b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    data = await exchange(server, raw)
    assert b"101" not in data.split(b"\r\n", 1)[0]
    assert data.count(b"HTTP/1.1 200 OK") == 3
    first, second, third = (data.index(b) for b in (b"GET /first? 0", b"POST /second? 3", b"GET /last? 0"))
    assert first < second < third, "the body of an upgrade request is read as HTTP/1.1's"


async def test_an_upgrade_request_with_a_chunked_body_is_read_whole(server):
    raw = (
        b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\nUpgrade: h2c\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
    )
    data = await exchange(server, raw)
    assert data.startswith(b"HTTP/1.1 200 ")
    assert data.endswith(b"POST /echo? 7")


async def test_a_bad_pipelined_request_is_answered_after_the_one_in_flight(server):
    """Answers keep the order of the requests: the 400 comes after the answer of the request before it."""
    data = await exchange(server, b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nNOT HTTP AT ALL\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 ")
    assert b"GET /slow? 0" in data
    assert data.index(b"GET /slow? 0") < data.index(b"HTTP/1.1 400 ")
    assert data.rstrip().endswith(b"}"), "the 400 is the last answer, then the connection closes"


async def test_a_pipelined_body_over_the_limit_is_413_after_the_answers_before_it(server):
    raw = (
        b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2048\r\n\r\n" + b"x" * 2048
    )
    data = await exchange(server, raw)
    assert data.startswith(b"HTTP/1.1 200 ")
    assert data.index(b"GET /slow? 0") < data.index(b"HTTP/1.1 413 ")


# Holding its ground: half-sent requests, too many connections, deep pipelines, Expect: 100-continue -------


async def started(http: HttpServer) -> tuple[str, int]:
    return await http.start(host="127.0.0.1", port=0)


async def test_a_request_whose_head_never_ends_is_408_after_the_header_timeout():
    http = HttpServer(handler, header_timeout_s=0.05, body_timeout_s=60)
    address = await started(http)
    try:
        data = await exchange(address, b"GET /half HTTP/1.1\r\nHost: x\r\nX-Echo: not fin")
    finally:
        await http.close()
    assert data.startswith(b"HTTP/1.1 408 ")
    assert b"request headers not received within 0.05 s" in data
    assert (http.stats.header_timeouts, http.stats.body_timeouts) == (1, 0)


async def test_a_request_whose_body_never_ends_is_408_after_the_body_timeout():
    http = HttpServer(handler, header_timeout_s=60, body_timeout_s=0.05)
    address = await started(http)
    try:
        data = await exchange(address, b"POST /half HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
    finally:
        await http.close()
    assert data.startswith(b"HTTP/1.1 408 ")
    assert b"request body not received" in data
    assert (http.stats.header_timeouts, http.stats.body_timeouts) == (0, 1)


async def test_a_request_sent_in_pieces_is_answered_and_its_connection_kept():
    """The read timer bounds an incomplete request only: the pieces of one that does arrive are no timeout."""
    http = HttpServer(handler, header_timeout_s=30, body_timeout_s=30)
    address = await started(http)
    try:
        reader, writer = await asyncio.open_connection(*address)
        for piece in (b"POST /pieces HTTP/1.1\r\nHo", b"st: x\r\nContent-Length: 4\r\n\r\nab", b"cd"):
            writer.write(piece)
            await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"POST /pieces? 4"), 10)
        writer.close()
    finally:
        await http.close()
    assert head.startswith(b"HTTP/1.1 200 ")
    assert http.stats.header_timeouts + http.stats.body_timeouts == 0


async def test_a_connection_over_the_cap_is_refused_at_once_and_counted():
    http = HttpServer(handler, max_connections=2)
    address = await started(http)
    held = []
    try:
        for _ in range(2):
            reader, writer = await asyncio.open_connection(*address)
            writer.write(b"GET /kept HTTP/1.1\r\nHost: x\r\n\r\n")
            await asyncio.wait_for(reader.readuntil(b"GET /kept? 0"), 10)
            held.append(writer)
        refused = await exchange(address, b"GET /more HTTP/1.1\r\nHost: x\r\n\r\n")
        held.pop().close()
        answered = await eventually(
            lambda: exchange(address, b"GET /later HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
            lambda data: b"GET /later? 0" in data,
        )
    finally:
        for writer in held:
            writer.close()
        await http.close()
    assert refused.startswith(b"HTTP/1.1 503 ")
    assert b"too_many_connections" in refused
    assert b"GET /more" not in refused
    assert http.stats.refused_connections >= 1
    assert b"GET /later? 0" in answered, "a connection freed makes room"


async def test_a_deep_pipeline_is_read_no_further_than_its_bound_until_answered():
    release = asyncio.Event()

    async def holding(request: HttpRequest) -> HttpResponse:
        if request.path == "/hold":
            await release.wait()
        return HttpResponse(200, request.path.encode(), content_type="text/plain")

    http = HttpServer(holding, max_pipelined=2)
    address = await started(http)
    padding = b"X-Pad: " + b"p" * 1000 + b"\r\n"  # about 1 KiB a request: a few to a read slice
    requests = b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n" + b"".join(
        b"GET /r%d HTTP/1.1\r\nHost: x\r\n%b\r\n" % (n, padding) for n in range(40)
    )
    try:
        reader, writer = await asyncio.open_connection(*address)
        writer.write(requests + b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        [connection] = await eventually(
            lambda: _connections(http), lambda c: len(c) == 1 and http.stats.paused_pipelines > 0
        )
        waiting = connection.waiting
        release.set()
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    finally:
        release.set()
        await http.close()
    assert http.stats.paused_pipelines >= 1
    assert waiting <= 2 + 5, "the bound, and the requests of the 4 KiB slice that reached it"
    assert data.count(b"HTTP/1.1 200 OK") == 42, "every request is answered once reading resumes"
    assert data.index(b"/r39") < data.index(b"/last")


async def _connections(http: HttpServer) -> list:
    return list(http.connections)


def refuse_without_key(method: str, path: str, headers: dict[str, str]) -> HttpResponse | None:
    if headers.get("authorization") != "Bearer ok":
        return HttpResponse(401, b'{"error": "bad key"}')
    return None


async def expect_continue(
    address: tuple[str, int], head: bytes
) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(*address)
    writer.write(head)
    await writer.drain()
    first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    return first, reader, writer


async def test_expect_100_continue_is_answered_before_the_body_is_read():
    http = HttpServer(handler, check_head=refuse_without_key)
    address = await started(http)
    try:
        first, reader, writer = await expect_continue(
            address,
            b"POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok\r\nExpect: 100-continue\r\n"
            b"Content-Length: 5\r\nConnection: close\r\n\r\n",
        )
        writer.write(b"hello")
        rest = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    finally:
        await http.close()
    assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert rest.startswith(b"HTTP/1.1 200 ")
    assert rest.endswith(b"POST /echo? 5")


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"Authorization: Bearer nope\r\nContent-Length: 5\r\n", b"401"),
        (b"Authorization: Bearer ok\r\nContent-Length: 999999\r\n", b"413"),
    ],
)
async def test_expect_100_continue_refused_from_its_head_gets_the_final_answer_unread(
    head: bytes, status: bytes
):
    http = HttpServer(handler, max_body_bytes=1024, check_head=refuse_without_key)
    address = await started(http)
    try:
        first, reader, writer = await expect_continue(
            address, b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n" + head + b"\r\n"
        )
        rest = await asyncio.wait_for(reader.read(), 10)  # the server closes without waiting for the body
        writer.close()
    finally:
        await http.close()
    assert first.startswith(b"HTTP/1.1 " + status)
    assert b"Connection: close" in first
    assert b"100 Continue" not in first + rest


async def test_an_expectation_other_than_100_continue_is_417():
    http = HttpServer(handler)
    address = await started(http)
    try:
        data = await exchange(
            address, b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: magic\r\nContent-Length: 1\r\n\r\n"
        )
    finally:
        await http.close()
    assert data.startswith(b"HTTP/1.1 417 ")
