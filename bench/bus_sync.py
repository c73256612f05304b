"""What `sync_interval: always` costs: JetStream publishes acknowledged only once fsynced, against the
default (fsync every two minutes, which loses acknowledged messages when the host crashes).

Two nats-servers with file storage, one per setting, each given the PODWAY_EVENTS stream; the relay's way
of publishing (pipelined `publish_async` batches of `--batch` envelopes of `--payload-bytes`, Nats-Msg-Id
set, acknowledgements awaited together) sends `--events` events to each, then one event at a time with its
acknowledgement awaited (a lone commit's latency). Reported: events per second and the acknowledgement
latency of lone events, p50 and p99, for both settings.

Left out: the services and the database (scheduler-e2e and admission measure those on the default
embedded server), several producers at once, a disk other processes are writing to.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from nats.js.api import StorageType, StreamConfig

from bench.measure import percentile
from libs.events.catalogue import EVENTS_STREAM
from libs.messaging.broker import jetstream, make_broker
from libs.runtime.nats_server import EmbeddedNatsServer

SYNCED = "jetstream {{\n  store_dir: {store}\n  sync_interval: always\n}}\n"
DEFAULT = "jetstream {{\n  store_dir: {store}\n}}\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=256, help="events published before awaiting the acks")
    parser.add_argument("--lone", type=int, default=500, help="events published one at a time")
    parser.add_argument("--payload-bytes", type=int, default=1_500, help="about a pods.bound of 8 pods")


def run(args: argparse.Namespace) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="podway-bus-sync-") as tmp:
        for label, template in (("default", DEFAULT), ("sync_always", SYNCED)):
            data_dir = Path(tmp) / label
            data_dir.mkdir(parents=True)
            config = data_dir / "nats.conf"
            config.write_text(template.format(store=data_dir / "jetstream"))
            server = EmbeddedNatsServer(data_dir=data_dir, config_file=config).start()
            try:
                figures = asyncio.run(_measure(server.url, args))
            finally:
                server.stop()
            metrics.update({f"{key}_{label}": value for key, value in figures.items()})
    metrics["throughput_ratio_sync_always"] = round(
        metrics["events_per_second_sync_always"] / max(1.0, metrics["events_per_second_default"]), 3
    )
    params = {
        "events": args.events,
        "batch": args.batch,
        "lone": args.lone,
        "payload_bytes": args.payload_bytes,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    return {"name": "bus-sync", "params": params, "metrics": metrics}


async def _measure(url: str, args: argparse.Namespace) -> dict[str, float]:
    broker = make_broker(url, "bus-sync")
    try:
        await broker.connect()
        js = jetstream(broker)
        await js.add_stream(
            StreamConfig(name=EVENTS_STREAM, subjects=["podway.events.>"], storage=StorageType.FILE)
        )
        payload = os.urandom(args.payload_bytes)
        started = time.perf_counter()
        for first in range(0, args.events, args.batch):
            futures = [
                await js.publish_async(
                    "podway.events.pods.bound", payload, headers={"Nats-Msg-Id": str(uuid.uuid4())}
                )
                for _ in range(min(args.batch, args.events - first))
            ]
            await asyncio.gather(*futures)
        elapsed = time.perf_counter() - started
        lone: list[float] = []
        for _ in range(args.lone):
            sent = time.perf_counter()
            await js.publish("podway.events.pods.bound", payload, headers={"Nats-Msg-Id": str(uuid.uuid4())})
            lone.append((time.perf_counter() - sent) * 1000)
    finally:
        await broker.stop()
    return {
        "events_per_second": round(args.events / elapsed, 1),
        "lone_ack_ms_p50": round(percentile(lone, 0.50), 3),
        "lone_ack_ms_p99": round(percentile(lone, 0.99), 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bus_sync", description=__doc__)
    add_arguments(parser)
    parser.add_argument("-o", "--output", choices=("json",), default="json")
    print(json.dumps(run(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
