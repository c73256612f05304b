"""The JetStream streams Podway uses: events, work, dead letters, and the router's ledger bucket.

Streams are provisioned by an admin step, not by services: `podway migrate` (with a NATS URL) and `podway up`
call `ensure_streams`, and in a deployment only the `migrate` NATS user may create or update a stream (see
`libs/messaging/permissions.py`). Services call `require_streams`, which only reads the streams' info, as
`ensure_streams` does when the streams are already as configured.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from libs.events.catalogue import (
    DLQ_PREFIX,
    DLQ_STREAM,
    EVENTS_PREFIX,
    EVENTS_STREAM,
    WORK_PREFIX,
    WORK_STREAM,
)
from libs.events.inference import (
    ROUTER_EXPERIMENTS_BUCKET,
    ROUTER_LEDGER_BUCKET,
)

#: Long enough for a relay that crashed after publishing to restart and re-publish into the same window.
DUPLICATE_WINDOW_S = 120.0


class StreamMissing(RuntimeError):
    """A stream a service needs has not been provisioned."""


def stream_replicas() -> int | None:
    """How many JetStream servers hold each stream: `PODWAY_STREAM_REPLICAS` (3 on a three-server cluster such
    as deploy/k8s's, so a stream survives the loss of one server). None when not set: a new stream is created
    on one server and an existing one keeps its count, so a later provisioning never shrinks a replicated
    stream that was not told to."""
    value = os.environ.get("PODWAY_STREAM_REPLICAS")
    return max(1, int(value)) if value else None


def _limit(variable: str, default: float | None = None) -> float | None:
    value = os.environ.get(variable)
    return float(value) if value else default


DLQ_MAX_AGE_S = 14 * 24 * 3600


def stream_configs(
    *,
    duplicate_window_s: float = DUPLICATE_WINDOW_S,
    replicas: int | None = None,
) -> list[StreamConfig]:
    """Domain events (file, dedup window), work queue (removed on ack), dead letters (kept two weeks) and the
    router's two key-value buckets (budget ledgers, experiments), each on `replicas` servers (default `stream_replicas()`; None: see there).

    Size (bytes) and age (seconds) limits come from the environment, none by default (the server's store is
    the bound): `PODWAY_EVENTS_MAX_BYTES`, `PODWAY_EVENTS_MAX_AGE_SECONDS`, `PODWAY_WORK_MAX_BYTES`,
    `PODWAY_DLQ_MAX_BYTES`, `PODWAY_DLQ_MAX_AGE_SECONDS`. A deployment sets them so the streams together stay
    below JetStream's `max_file_store`, itself below the volume: a full volume stops every stream, a full
    stream drops its oldest messages."""
    copies = replicas or stream_replicas()
    events_bytes, work_bytes, dlq_bytes = (
        _limit(f"PODWAY_{name}_MAX_BYTES") for name in ("EVENTS", "WORK", "DLQ")
    )
    return [
        StreamConfig(
            name=EVENTS_STREAM,
            subjects=[f"{EVENTS_PREFIX}.>"],
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            duplicate_window=duplicate_window_s,
            num_replicas=copies,
            max_bytes=int(events_bytes) if events_bytes else None,
            max_age=_limit("PODWAY_EVENTS_MAX_AGE_SECONDS"),
        ),
        StreamConfig(
            name=WORK_STREAM,
            subjects=[f"{WORK_PREFIX}.>"],
            storage=StorageType.FILE,
            retention=RetentionPolicy.WORK_QUEUE,
            duplicate_window=duplicate_window_s,
            num_replicas=copies,
            max_bytes=int(work_bytes) if work_bytes else None,
        ),
        StreamConfig(
            name=DLQ_STREAM,
            subjects=[f"{DLQ_PREFIX}.>"],
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            duplicate_window=duplicate_window_s,
            num_replicas=copies,
            max_bytes=int(dlq_bytes) if dlq_bytes else None,
            max_age=_limit("PODWAY_DLQ_MAX_AGE_SECONDS", DLQ_MAX_AGE_S),
        ),
        # In memory: a restarted server starts every budget full again, once.
        _key_value_bucket(ROUTER_LEDGER_BUCKET, StorageType.MEMORY, duplicate_window_s, copies),
        # The router's experiments (feedback tallies and conclusions), on file: an A/B test outlives restarts.
        _key_value_bucket(ROUTER_EXPERIMENTS_BUCKET, StorageType.FILE, duplicate_window_s, copies),
    ]


def _key_value_bucket(
    bucket: str, storage: StorageType, duplicate_window_s: float, copies: int | None
) -> StreamConfig:
    """A key-value bucket's stream as nats-py's create_key_value makes it (one value per key, direct gets)."""
    return StreamConfig(
        name=f"KV_{bucket}",
        subjects=[f"$KV.{bucket}.>"],
        storage=storage,
        retention=RetentionPolicy.LIMITS,
        max_msgs_per_subject=1,
        discard=DiscardPolicy.NEW,
        allow_direct=True,
        allow_rollup_hdrs=True,
        deny_delete=True,
        duplicate_window=duplicate_window_s,
        num_replicas=copies,
    )


async def ensure_streams(js: JetStreamContext, configs: list[StreamConfig] | None = None) -> None:
    """Create the streams, or update those whose configuration differs. Safe to call any number of times;
    when every stream is already as configured it only reads their info, so it needs no right to change them.
    A config that leaves the replica count unset keeps the existing stream's."""
    for config in configs if configs is not None else stream_configs():
        assert config.name is not None
        try:
            current = (await js.stream_info(config.name)).config
        except NotFoundError:
            await js.add_stream(config)
            continue
        if _differs(current, config):
            if config.num_replicas is None:
                config = replace(config, num_replicas=current.num_replicas)
            await js.update_stream(config)


async def require_streams(js: JetStreamContext, names: Iterable[str]) -> None:
    """Check that the named streams exist (a service's start-up); raises StreamMissing naming the admin step."""
    for name in sorted(set(names)):
        try:
            await js.stream_info(name)
        except NotFoundError as exc:
            raise StreamMissing(
                f"JetStream stream {name} does not exist: provision the streams first (`podway migrate` with "
                "PODWAY_NATS_URL set, or `podway up`)"
            ) from exc


def _differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    """Whether a field `wanted` sets has another value on the server (fields left unset keep the server's)."""
    server = current.as_dict()
    return any(server.get(key) != value for key, value in wanted.as_dict().items())
