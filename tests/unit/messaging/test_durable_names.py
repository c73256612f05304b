"""Durable consumer names derived from names NATS refuses (a node's, with dots), checked by a real
nats-server: the derived name is accepted, the raw one refused."""

from __future__ import annotations

import nats
import pytest
from nats.js.api import ConsumerConfig
from nats.js.errors import BadRequestError

from libs.events.catalogue import EVENTS_STREAM
from libs.messaging.durable_names import MAX_LENGTH, durable_name


@pytest.mark.parametrize("instance", ["0", "node-agent-0", "gpu_pool-3"])
def test_a_name_nats_takes_is_kept(instance):
    assert durable_name("node-agent", instance) == f"node-agent-{instance}"


def test_names_mapped_alike_stay_apart_and_short():
    dotted = durable_name("node-agent", "ip-10-0-1-2.ec2.internal")
    assert dotted.startswith("node-agent-ip-10-0-1-2-ec2-internal-")
    assert dotted != durable_name("node-agent", "ip-10-0-1-2-ec2.internal")
    assert durable_name("node-agent", "a.b") != durable_name("node-agent", "a*b")
    long = durable_name("node-agent", "n" * 200)
    assert len(long) == MAX_LENGTH
    assert long != durable_name("node-agent", "n" * 201)
    assert durable_name("node-agent", "a.b") == durable_name("node-agent", "a.b")


@pytest.mark.parametrize("instance", ["ip-10-0-1-2.ec2.internal", "gpu node>1", "rack/4*", "n" * 300])
async def test_nats_accepts_the_derived_durable_where_it_refuses_the_raw_name(nats_url: str, instance: str):
    client = await nats.connect(nats_url)
    try:
        js = client.jetstream()
        raw = f"node-agent-{instance}"
        with pytest.raises((BadRequestError, ValueError)):
            await js.add_consumer(EVENTS_STREAM, ConsumerConfig(durable_name=raw, ack_policy="explicit"))
        name = durable_name("node-agent", instance)
        await js.add_consumer(EVENTS_STREAM, ConsumerConfig(durable_name=name, ack_policy="explicit"))
        assert (await js.consumer_info(EVENTS_STREAM, name)).name == name
    finally:
        await client.close()
