"""Request/reply on podway.rpc.* with queue groups, and direct event publication for clients."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest
from nats.js import JetStreamContext
from pydantic import BaseModel

from libs.events.catalogue import EVENTS_STREAM, RpcSubject
from libs.messaging.broker import connection, make_broker
from libs.messaging.publisher import NatsPublisher
from libs.messaging.rpc import RpcError, RpcTimeout, RpcUnavailable, request, serve_rpc
from tests.integration.messaging.conftest import running, stream_messages
from tests.integration.messaging.test_event_consumer import job_submitted

SUBJECT = RpcSubject.ADMISSION_APPLY.value


class Echo(BaseModel):
    text: str


def counting_echo(served: Counter[str], replica: str) -> Callable[[bytes], Awaitable[Echo]]:
    """An RPC handler that upper-cases, refuses "explode", and counts what each replica served."""

    async def handle(body: bytes) -> Echo:
        text = Echo.model_validate_json(body).text
        if text == "explode":
            raise ValueError("cannot apply an exploding manifest")
        served[replica] += 1
        return Echo(text=text.upper())

    return handle


async def test_requests_are_answered_once_by_one_replica_of_the_queue_group(nats_url: str) -> None:
    served: Counter[str] = Counter()
    first, second = make_broker(nats_url, "admission-1"), make_broker(nats_url, "admission-2")
    serve_rpc(first, SUBJECT, counting_echo(served, "admission-1"), queue="admission")
    serve_rpc(second, SUBJECT, counting_echo(served, "admission-2"), queue="admission")
    client = make_broker(nats_url, "client")

    async with running(first), running(second), running(client):
        replies = [
            await request(connection(client), SUBJECT, Echo(text=f"m{i}"), timeout_s=2) for i in range(20)
        ]
        via_broker = await request(client, SUBJECT, b'{"text": "broker"}', timeout_s=2)

    assert [Echo.model_validate_json(r).text for r in replies] == [f"M{i}" for i in range(20)]
    assert Echo.model_validate_json(via_broker).text == "BROKER"
    assert sum(served.values()) == 21
    assert set(served) == {"admission-1", "admission-2"}  # all 21 on one replica: p = 2**-20


async def test_handler_errors_come_back_as_errors_not_timeouts(nats_url: str) -> None:
    served: Counter[str] = Counter()
    server = make_broker(nats_url, "admission")
    serve_rpc(server, SUBJECT, counting_echo(served, "admission"), queue="admission")
    client = make_broker(nats_url, "client")

    async with running(server), running(client):
        with pytest.raises(RpcError) as raised:
            await request(connection(client), SUBJECT, Echo(text="explode"), timeout_s=2)

    assert (raised.value.error_type, raised.value.message) == (
        "ValueError",
        "cannot apply an exploding manifest",
    )


async def test_nobody_serving_is_reported_as_unavailable(nats_url: str) -> None:
    async with running(make_broker(nats_url, "client")) as client:
        with pytest.raises(RpcUnavailable):
            await request(connection(client), "podway.rpc.nobody.home", b"{}", timeout_s=1)
        with pytest.raises((RpcUnavailable, RpcTimeout)):
            await request(client, "podway.rpc.nobody.home", b"{}", timeout_s=1)


async def test_a_server_with_room_for_several_requests_serves_them_at_once(nats_url: str) -> None:
    arrived, all_here = 0, asyncio.Event()

    async def wait_for_the_others(body: bytes) -> bytes:
        nonlocal arrived
        arrived += 1
        if arrived == 4:
            all_here.set()
        await all_here.wait()  # served one at a time, the first request would wait here forever
        return body

    server = make_broker(nats_url, "admission")
    serve_rpc(server, SUBJECT, wait_for_the_others, queue="admission", max_in_flight=4)
    client = make_broker(nats_url, "client")

    async with running(server), running(client):
        replies = await asyncio.gather(
            *(request(connection(client), SUBJECT, f"r{i}".encode(), timeout_s=5) for i in range(4))
        )

    assert sorted(replies) == [b"r0", b"r1", b"r2", b"r3"]


async def test_publisher_publishes_an_event_once_however_often_it_is_sent(
    nats_url: str, js: JetStreamContext
) -> None:
    envelope = job_submitted()
    async with running(make_broker(nats_url, "client")) as client:
        publisher = NatsPublisher(client)
        await publisher.publish(envelope)
        await publisher.publish(envelope)  # a client retrying after a lost PubAck

    [stored] = await stream_messages(js, EVENTS_STREAM)
    assert stored.subject == "podway.events.job.submitted"
    assert stored.data == envelope.to_bytes()


async def test_an_answer_larger_than_the_bus_carries_is_refused_at_once_not_timed_out(nats_url: str) -> None:
    async def huge(body: bytes) -> bytes:
        return b"x" * (connection(server).max_payload + 1)

    server = make_broker(nats_url, "admission")
    serve_rpc(server, SUBJECT, huge, queue="admission")
    client = make_broker(nats_url, "client")

    async with running(server), running(client):
        with pytest.raises(RpcError) as raised:
            await request(connection(client), SUBJECT, b"{}", timeout_s=30)

    assert not isinstance(raised.value, RpcTimeout)
    assert raised.value.error_type == "AnswerTooLarge"
    assert "larger than the bus carries" in raised.value.message
