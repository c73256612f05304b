"""Stream provisioning is idempotent and follows configuration changes."""

from __future__ import annotations

import pytest
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType

from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM, WORK_STREAM
from libs.messaging.broker import jetstream, make_broker, start_broker
from libs.messaging.streams import StreamMissing, ensure_streams, stream_configs
from libs.runtime.nats_server import EmbeddedNatsServer


async def test_streams_exist_with_the_documented_policies(js: JetStreamContext) -> None:
    events = (await js.stream_info(EVENTS_STREAM)).config
    work = (await js.stream_info(WORK_STREAM)).config
    dlq = (await js.stream_info(DLQ_STREAM)).config

    assert (events.subjects, events.storage, events.retention) == (
        ["podway.events.>"],
        StorageType.FILE,
        RetentionPolicy.LIMITS,
    )
    assert events.duplicate_window is not None
    assert events.duplicate_window >= 120
    assert (work.subjects, work.retention) == (["podway.work.>"], RetentionPolicy.WORK_QUEUE)
    assert dlq.subjects == ["podway.dlq.>"]


async def test_ensuring_twice_is_harmless_and_a_changed_config_is_applied(js: JetStreamContext) -> None:
    await ensure_streams(js)
    await ensure_streams(js, stream_configs(duplicate_window_s=300))

    assert (await js.stream_info(EVENTS_STREAM)).config.duplicate_window == 300
    assert len(await js.streams_info()) == 5  # events, work, dead letters, the router's two buckets


async def test_a_service_does_not_start_on_streams_nobody_provisioned(
    nats_server: EmbeddedNatsServer,
) -> None:
    broker = make_broker(nats_server.url, "admission-0")
    try:
        with pytest.raises(StreamMissing, match="podway migrate"):
            await start_broker(broker)
        assert await jetstream(broker).streams_info() == []
    finally:
        await broker.stop()
