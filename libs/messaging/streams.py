"""The three JetStream streams Podway uses, provisioned idempotently."""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError

from libs.events.catalogue import (
    DLQ_PREFIX,
    DLQ_STREAM,
    EVENTS_PREFIX,
    EVENTS_STREAM,
    WORK_PREFIX,
    WORK_STREAM,
)

#: Long enough for a relay that crashed after publishing to restart and re-publish into the same window.
DUPLICATE_WINDOW_S = 120.0
STREAM_EXISTS_WITH_OTHER_CONFIG = 10058


def stream_configs(
    *, duplicate_window_s: float = DUPLICATE_WINDOW_S, dlq_max_age_s: float = 14 * 24 * 3600
) -> list[StreamConfig]:
    """Domain events (file, dedup window), work queue (removed on ack), dead letters (kept two weeks)."""
    return [
        StreamConfig(
            name=EVENTS_STREAM,
            subjects=[f"{EVENTS_PREFIX}.>"],
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            duplicate_window=duplicate_window_s,
        ),
        StreamConfig(
            name=WORK_STREAM,
            subjects=[f"{WORK_PREFIX}.>"],
            storage=StorageType.FILE,
            retention=RetentionPolicy.WORK_QUEUE,
            duplicate_window=duplicate_window_s,
        ),
        StreamConfig(
            name=DLQ_STREAM,
            subjects=[f"{DLQ_PREFIX}.>"],
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            duplicate_window=duplicate_window_s,
            max_age=dlq_max_age_s,
        ),
    ]


async def ensure_streams(js: JetStreamContext, configs: list[StreamConfig] | None = None) -> None:
    """Create the streams, or update them when their configuration changed. Safe to call any number of times."""
    for config in configs if configs is not None else stream_configs():
        try:
            await js.add_stream(config)
        except BadRequestError as exc:
            if exc.err_code != STREAM_EXISTS_WITH_OTHER_CONFIG:
                raise
            await js.update_stream(config)
