"""Stream size and age limits from the environment (the Kubernetes manifests set them below the volume),
applied by a real nats-server when the streams are provisioned."""

from __future__ import annotations

import nats
import pytest

from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM, WORK_STREAM
from libs.messaging.streams import DLQ_MAX_AGE_S, ensure_streams, stream_configs
from libs.runtime.nats_server import EmbeddedNatsServer

LIMITS = {
    "PODWAY_EVENTS_MAX_BYTES": str(64 * 1024 * 1024),
    "PODWAY_EVENTS_MAX_AGE_SECONDS": str(7 * 86400),
    "PODWAY_WORK_MAX_BYTES": str(8 * 1024 * 1024),
    "PODWAY_DLQ_MAX_BYTES": str(16 * 1024 * 1024),
}


def test_without_settings_only_the_dead_letters_age_out(monkeypatch: pytest.MonkeyPatch):
    for variable in (*LIMITS, "PODWAY_DLQ_MAX_AGE_SECONDS"):
        monkeypatch.delenv(variable, raising=False)
    configs = {c.name: c for c in stream_configs()}
    assert [configs[n].max_bytes for n in (EVENTS_STREAM, WORK_STREAM, DLQ_STREAM)] == [None, None, None]
    assert configs[EVENTS_STREAM].max_age is None
    assert configs[DLQ_STREAM].max_age == DLQ_MAX_AGE_S


async def test_the_server_keeps_the_limits_set_in_the_environment(
    nats_server: EmbeddedNatsServer, monkeypatch: pytest.MonkeyPatch
):
    for variable, value in LIMITS.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("PODWAY_DLQ_MAX_AGE_SECONDS", "3600")
    client = await nats.connect(nats_server.url)
    try:
        js = client.jetstream()
        await ensure_streams(js)
        events = (await js.stream_info(EVENTS_STREAM)).config
        work = (await js.stream_info(WORK_STREAM)).config
        dlq = (await js.stream_info(DLQ_STREAM)).config
        assert (events.max_bytes, events.max_age) == (64 * 1024 * 1024, 7 * 86400)
        assert work.max_bytes == 8 * 1024 * 1024
        assert (dlq.max_bytes, dlq.max_age) == (16 * 1024 * 1024, 3600)

        monkeypatch.setenv("PODWAY_EVENTS_MAX_BYTES", str(32 * 1024 * 1024))
        await ensure_streams(js)  # a changed limit is applied to the existing stream
        assert (await js.stream_info(EVENTS_STREAM)).config.max_bytes == 32 * 1024 * 1024
    finally:
        await client.close()
