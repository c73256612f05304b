"""The bus on a 3-node JetStream cluster: every stream on three servers, clients that go on through another
server when theirs dies, and an outbox relay that fails loudly without a quorum and stores each event once
when the quorum is back."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import Callable

import pytest
from nats.js import JetStreamContext

from libs.db.uow import SqlAlchemyUnitOfWork
from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM, WORK_STREAM, EventType
from libs.events.inference import ROUTER_EXPERIMENTS_STREAM, ROUTER_LEDGER_STREAM
from libs.messaging.broker import connection, jetstream, make_broker
from libs.messaging.lite import LiteNats
from libs.messaging.publisher import MSG_ID_HEADER
from libs.messaging.relay import OutboxRelay
from libs.messaging.streams import ensure_streams, stream_configs
from tests.conftest import SQLITE_ONLY, FakeClock
from tests.integration.db.builders import make_envelope
from tests.integration.messaging.conftest import stream_messages
from tests.integration.messaging.test_outbox_relay import commit_events
from tests.nats_cluster import NatsCluster, kill_leader_of, stream_leader, until_stream_leader

STREAMS = (EVENTS_STREAM, WORK_STREAM, DLQ_STREAM, ROUTER_LEDGER_STREAM, ROUTER_EXPERIMENTS_STREAM)


async def test_every_stream_and_the_ledger_bucket_are_held_by_three_servers(
    nats_cluster: NatsCluster, cluster_js: JetStreamContext
) -> None:
    for name in STREAMS:
        info = await cluster_js.stream_info(name)
        assert info.config.num_replicas == 3, name
        assert info.cluster is not None
        assert info.cluster.leader in {node.name for node in nats_cluster.nodes}
        assert len(info.cluster.replicas or []) == 2, name


async def test_provisioning_again_without_a_replica_count_keeps_the_streams_on_three_servers(
    cluster_js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PODWAY_STREAM_REPLICAS", raising=False)

    await ensure_streams(cluster_js, stream_configs(duplicate_window_s=300))

    events = (await cluster_js.stream_info(EVENTS_STREAM)).config
    assert (events.num_replicas, events.duplicate_window) == (3, 300)


async def test_a_publisher_goes_on_through_another_server_when_the_stream_leader_dies(
    nats_cluster: NatsCluster,
) -> None:
    broker = make_broker(nats_cluster.url, "test-publisher")
    await broker.connect()
    try:
        js = jetstream(broker)
        leader = await until_stream_leader(js, EVENTS_STREAM)
        first = make_envelope(EventType.JOB_SUBMITTED, correlation_id="before")
        await js.publish(first.nats_subject, first.to_bytes(), headers={MSG_ID_HEADER: str(first.event_id)})

        kill_leader_of(nats_cluster, leader)
        assert await until_stream_leader(js, EVENTS_STREAM, not_on=leader) != leader
        second = make_envelope(EventType.JOB_SUBMITTED, correlation_id="after")
        for _ in range(3):  # the same Msg-Id each time: a publish whose ack was lost is stored once
            await _publish_until_acked(js, second.nats_subject, second.to_bytes(), str(second.event_id))

        stored = await stream_messages(js, EVENTS_STREAM)
        assert [m.headers[MSG_ID_HEADER] for m in stored] == [str(first.event_id), str(second.event_id)]
    finally:
        await broker.stop()


async def _publish_until_acked(js: JetStreamContext, subject: str, data: bytes, msg_id: str) -> None:
    """Publish as the relay does, again after a failure (the client may still be reconnecting)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            await js.publish(subject, data, headers={MSG_ID_HEADER: msg_id}, timeout=2)
            return
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


@SQLITE_ONLY
async def test_without_a_quorum_the_relay_fails_loudly_and_stores_each_event_once_when_it_is_back(
    nats_cluster: NatsCluster,
    uow_factory: Callable[[], SqlAlchemyUnitOfWork],
    fake_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = make_broker(nats_cluster.url, "admission-0")
    await broker.connect()
    try:
        js = jetstream(broker)
        relay = OutboxRelay(uow_factory, js, ack_timeout_s=1.0, clock=fake_clock)
        emitted = [make_envelope(EventType.POD_ADMITTED, correlation_id=f"pg-{i}") for i in range(5)]
        await commit_events(uow_factory, emitted)

        leader = await until_stream_leader(js, EVENTS_STREAM)
        first = kill_leader_of(nats_cluster, leader)
        second = next(i for i, node in enumerate(nats_cluster.nodes) if node.running)
        nats_cluster.kill(second)  # one server of three left: no stream can commit a message
        with caplog.at_level(logging.WARNING, logger="libs.messaging.relay"):
            refused = await relay.publish_pending()
        assert (refused.published, refused.failed) == (0, len(emitted))
        # No ack before the deadline, or no stream leader to answer at all: either way the reason is named.
        assert re.search(
            r"5 of 5 publishes failed; retrying next pass \((TimeoutError|NoStreamResponseError): ",
            caplog.text,
        ), caplog.text
        async with uow_factory() as uow:
            assert len(await uow.outbox.unpublished(limit=10)) == len(emitted)

        await asyncio.to_thread(nats_cluster.restart, first)
        await asyncio.to_thread(nats_cluster.restart, second)
        await until_stream_leader(js, EVENTS_STREAM, timeout_s=60)
        passes = [await relay.publish_pending()]
        while passes[-1].published + passes[-1].duplicates < len(emitted) and len(passes) < 60:
            await asyncio.sleep(0.5)  # the stream's new leader may still be catching up: the relay retries
            passes.append(await relay.publish_pending())

        stored = await stream_messages(js, EVENTS_STREAM)
        assert sorted(m.headers[MSG_ID_HEADER] for m in stored) == sorted(str(e.event_id) for e in emitted)
        async with uow_factory() as uow:
            assert await uow.outbox.unpublished(limit=10) == []
        assert await stream_leader(js, EVENTS_STREAM) is not None
        assert connection(broker).is_connected
    finally:
        await broker.stop()


def test_the_cli_client_connects_through_the_first_server_that_answers(nats_cluster: NatsCluster) -> None:
    nats_cluster.kill(0)

    with LiteNats(nats_cluster.url) as lite:
        assert lite.port == nats_cluster.nodes[1].port


def test_a_cluster_whose_port_was_taken_starts_again_on_new_ports(tmp_path) -> None:
    cluster = NatsCluster(tmp_path / "cluster")
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", cluster.nodes[1].route_port))
    squatter.listen()
    try:
        with cluster:
            assert cluster.nodes[1].route_port != squatter.getsockname()[1]
            assert len(cluster.pids()) == 3
    finally:
        squatter.close()
