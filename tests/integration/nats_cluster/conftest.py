"""A fresh 3-node JetStream cluster per test, its streams provisioned on all three servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from libs.messaging.broker import jetstream, make_broker, provision_streams
from tests.conftest import _run_blocking
from tests.ending import _no_task_outlives_the_test
from tests.nats_cluster import NatsCluster

__all__ = ["_no_task_outlives_the_test"]


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    cluster = NatsCluster(tmp_path / "nats-cluster").start()
    try:
        _run_blocking(provision_streams(cluster.url, replicas=3))
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def cluster_js(nats_cluster: NatsCluster) -> AsyncIterator[JetStreamContext]:
    """A JetStream context connected to the whole cluster (it reconnects across the servers)."""
    broker = make_broker(nats_cluster.url, "test-inspector")
    await broker.connect()
    try:
        yield jetstream(broker)
    finally:
        await broker.stop()
