"""The 3-node JetStream cluster as tests, the chaos harness and `make soak` drive it: `NatsCluster` (processes,
ports, stores; libs/runtime/nats_cluster.py) and what only a JetStream client can tell, a stream's leader."""

from __future__ import annotations

import asyncio
import time

from nats.js import JetStreamContext
from nats.js.errors import Error as JetStreamError

from libs.runtime.nats_cluster import NatsCluster

__all__ = ["NatsCluster", "kill_leader_of", "stream_leader", "until_stream_leader"]


async def stream_leader(js: JetStreamContext, stream: str) -> str | None:
    """The server leading `stream` (JetStream API STREAM.INFO -> cluster.leader); None while it has none."""
    try:
        info = await js.stream_info(stream)
    except (JetStreamError, TimeoutError):
        return None
    return info.cluster.leader if info.cluster is not None else None


async def until_stream_leader(
    js: JetStreamContext, stream: str, *, not_on: str | None = None, timeout_s: float = 30.0
) -> str:
    """Wait until `stream` has a leader (other than `not_on`) and return it; AssertionError at the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = await stream_leader(js, stream)
        if leader is not None and leader != not_on:
            return leader
        await asyncio.sleep(0.2)
    raise AssertionError(f"{stream} had no leader other than {not_on} within {timeout_s:g}s")


def kill_leader_of(cluster: NatsCluster, leader: str) -> int:
    """SIGKILL the server called `leader`; returns its index (to restart it)."""
    index = cluster.index_of(leader)
    cluster.kill(index)
    return index
