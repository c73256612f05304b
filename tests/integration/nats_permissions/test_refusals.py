"""What the deployed NATS config refuses each user, on a real server.

A refusal reaches nats-py as an error on the connection, after the call returned; `settle()` waits until the
server has answered everything sent before it, so the refusals of the calls before it are in by then. Every
refusal is checked against a control: the same connection doing what it is allowed gets no error.
"""

from __future__ import annotations

from dataclasses import dataclass

import nats.errors
import pytest
from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM, WORK_STREAM, EventType, RpcSubject, WorkSubject
from libs.events.inference import (
    INFERENCE_FEEDBACK_SUBJECT,
    ROUTER_FLEET_STATUS_SUBJECT,
    ROUTER_OUTCOMES_SUBJECT,
    ROUTER_SCOREBOARD_SUBJECT,
    ROUTER_STATUS_SUBJECT,
)
from libs.messaging.broker import connection, jetstream, make_broker
from libs.messaging.permissions import USERS, NatsUser, user
from libs.messaging.streams import ensure_streams, require_streams, stream_configs
from libs.runtime.settings import url_with_credentials
from tests.integration.nats_permissions.conftest import Refusal, SecuredNats, refusals, settle

STREAMS = (EVENTS_STREAM, WORK_STREAM, DLQ_STREAM)
RPC_SUBJECTS = (
    *RpcSubject,
    ROUTER_SCOREBOARD_SUBJECT,
    ROUTER_STATUS_SUBJECT,
    ROUTER_FLEET_STATUS_SUBJECT,
    INFERENCE_FEEDBACK_SUBJECT,
)


@dataclass(frozen=True)
class Probe:
    """One publish or subscription, and whether the user may do it."""

    action: str  # "publish" or "subscription"
    subject: str
    allowed: bool
    queue: str | None = None

    @property
    def refusal(self) -> Refusal:
        return Refusal.of(self.action, self.subject, self.queue)


def probes_for(me: NatsUser) -> list[Probe]:
    """Everything Podway's subjects offer, each marked with whether `me`'s role allows it."""
    probes = [Probe("publish", event.subject, event in me.emits) for event in EventType]
    watches_events = "podway.events.>" in me.watches
    probes += [Probe("subscription", event.subject, watches_events) for event in EventType]
    probes += [Probe("subscription", "podway.events.>", watches_events)]
    probes += [
        Probe("publish", ROUTER_OUTCOMES_SUBJECT, ROUTER_OUTCOMES_SUBJECT in me.calls),
        Probe("subscription", ROUTER_OUTCOMES_SUBJECT, ROUTER_OUTCOMES_SUBJECT in me.watches),
    ]
    probes += [Probe("publish", WorkSubject.INFERENCE, WorkSubject.INFERENCE in me.enqueues)]
    probes += [Probe("subscription", WorkSubject.INFERENCE, False)]
    probes += [Probe("publish", subject, subject in me.calls) for subject in RPC_SUBJECTS]
    for owner in USERS:
        for served in owner.serves:
            if not served.queue:  # every server hears each request: its owner only, in or out of a group
                probes.append(Probe("subscription", served.subject, owner is me))
                probes.append(Probe("subscription", served.subject, owner is me, queue="intruders"))
                continue
            probes.append(Probe("subscription", served.subject, owner is me, queue=served.queue))
            probes.append(Probe("subscription", served.subject, False))  # outside the queue group
            probes.append(Probe("subscription", served.subject, False, queue="intruders"))
        for durable in owner.durables:
            consumer = f"{durable.stream}.{durable.name}"
            mine = owner is me
            probes += [
                Probe("publish", f"$JS.API.CONSUMER.CREATE.{consumer}", mine),
                Probe("publish", f"$JS.API.CONSUMER.CREATE.{consumer}.podway.events.pods.bound", mine),
                Probe("publish", f"$JS.API.CONSUMER.DURABLE.CREATE.{consumer}", mine),
                Probe("publish", f"$JS.API.CONSUMER.INFO.{consumer}", mine),
                Probe("publish", f"$JS.API.CONSUMER.MSG.NEXT.{consumer}", mine),
                Probe("publish", f"$JS.ACK.{consumer}.1.7.7.1700000000000000000.0", mine),
                Probe("publish", f"podway.dlq.{durable.name}", mine),
                Probe("publish", f"$JS.API.CONSUMER.DELETE.{consumer}", False),
            ]
        inbox = f"_INBOX.{owner.name}.probe"
        probes.append(Probe("subscription", inbox, owner is me))
        probes.append(Probe("publish", inbox, owner.name in me.answers))
    for stream in STREAMS:
        probes += [
            Probe("publish", f"$JS.API.STREAM.INFO.{stream}", stream in me.checks or stream in me.provisions),
            Probe("publish", f"$JS.API.STREAM.CREATE.{stream}", stream in me.provisions),
            Probe("publish", f"$JS.API.STREAM.UPDATE.{stream}", stream in me.provisions),
            Probe("publish", f"$JS.API.STREAM.DELETE.{stream}", False),
            Probe("publish", f"$JS.API.STREAM.PURGE.{stream}", False),
        ]
    probes += [
        Probe("publish", "$JS.API.STREAM.NAMES", False),
        Probe("publish", "$JS.API.CONSUMER.DURABLE.CREATE.PODWAY_EVENTS.someone-else", False),
        Probe("subscription", "_INBOX.>", False),
        Probe("subscription", "_INBOX.probe", False),  # nats-py's default prefix: nobody's
        Probe("subscription", "podway.dlq.>", False),
        Probe("subscription", ">", False),
        Probe("publish", "podway.unknown", False),
    ]
    return probes


@pytest.mark.parametrize("name", [u.name for u in USERS])
async def test_each_user_is_refused_exactly_what_its_role_leaves_out(
    secured_nats: SecuredNats, name: str, connect, refusal_log
):
    probes = probes_for(user(name))
    assert any(p.allowed for p in probes)
    assert any(not p.allowed for p in probes)
    broker: NatsBroker = await connect(name)
    client = connection(broker)

    for probe in probes:
        if probe.action == "publish":
            await client.publish(probe.subject, b"")
        else:
            await client.subscribe(probe.subject, queue=probe.queue or "")
    await settle(client)

    refused = refusals(refusal_log, f"probe-{name}")
    assert refused == {p.refusal for p in probes if not p.allowed}


async def test_a_service_publishes_its_own_events_and_no_other_services(connect, refusal_log):
    agent = await connect("node_agent")

    ack = await jetstream(agent).publish(EventType.PODS_RUNNING.subject, b"{}", stream=EVENTS_STREAM)
    await connection(agent).publish(EventType.PODS_BOUND.subject, b"{}")  # the scheduler's event
    await settle(connection(agent))

    assert ack.seq == 1
    assert refusals(refusal_log) == {Refusal.of("publish", EventType.PODS_BOUND.subject)}
    state = (await jetstream(agent).stream_info(EVENTS_STREAM, subjects_filter=">")).state
    assert state.subjects == {EventType.PODS_RUNNING.subject: 1}


async def test_only_the_client_may_watch_the_event_stream(connect, refusal_log):
    client, agent = await connect("client"), await connect("node_agent")
    watching = await connection(client).subscribe("podway.events.>")
    eavesdropping = await connection(agent).subscribe("podway.events.>")
    await settle(connection(client))

    await jetstream(agent).publish(EventType.PODS_RUNNING.subject, b"{}", stream=EVENTS_STREAM)
    seen = await watching.next_msg(timeout=5)
    await settle(connection(agent))

    assert seen.subject == EventType.PODS_RUNNING.subject
    assert refusals(refusal_log) == {Refusal.of("subscription", "podway.events.>")}
    assert eavesdropping.pending_msgs == 0


async def test_a_service_cannot_pull_or_acknowledge_from_another_services_durable(connect, refusal_log):
    scheduler, agent = await connect("scheduler"), await connect("node_agent")
    await jetstream(scheduler).add_consumer(
        EVENTS_STREAM,
        ConsumerConfig(
            durable_name="scheduler",
            filter_subjects=[EventType.PODS_RUNNING.subject],
            ack_policy=AckPolicy.EXPLICIT,
        ),
    )
    await jetstream(agent).publish(EventType.PODS_RUNNING.subject, b"{}", stream=EVENTS_STREAM)

    # The node agent asks the scheduler's durable for its next message, into an inbox of its own.
    inbox = connection(agent).new_inbox()
    stolen = await connection(agent).subscribe(inbox)
    await connection(agent).publish(f"$JS.API.CONSUMER.MSG.NEXT.{EVENTS_STREAM}.scheduler", b"1", reply=inbox)
    await settle(connection(agent))
    untouched = await jetstream(scheduler).consumer_info(EVENTS_STREAM, "scheduler")

    # The scheduler takes it; the node agent's ack of that message is refused too.
    (message,) = await (await jetstream(scheduler).pull_subscribe_bind("scheduler", EVENTS_STREAM)).fetch(1)
    await connection(agent).publish(message.reply, b"+ACK")
    await settle(connection(agent))
    still_pending = await jetstream(scheduler).consumer_info(EVENTS_STREAM, "scheduler")
    await message.ack_sync()
    acked = await jetstream(scheduler).consumer_info(EVENTS_STREAM, "scheduler")

    assert refusals(refusal_log) == {
        Refusal.of("publish", f"$JS.API.CONSUMER.MSG.NEXT.{EVENTS_STREAM}.scheduler"),
        Refusal.of("publish", message.reply),
    }
    assert stolen.pending_msgs == 0
    assert (untouched.num_pending, untouched.num_ack_pending) == (1, 0)
    assert (still_pending.num_pending, still_pending.num_ack_pending) == (0, 1)
    assert (acked.num_pending, acked.num_ack_pending) == (0, 0)


async def test_replies_reach_their_caller_and_no_one_else(connect, refusal_log):
    admission, client, agent = (
        await connect("admission"),
        await connect("client"),
        await connect("node_agent"),
    )

    async def answer(msg: Msg) -> None:
        await msg.respond(b"pods")

    await connection(admission).subscribe(RpcSubject.ADMISSION_GET, queue="admission", cb=answer)
    every_inbox = await connection(agent).subscribe("_INBOX.>")
    clients_inbox = await connection(agent).subscribe("_INBOX.client.>")
    await settle(connection(admission))
    await settle(connection(agent))

    reply = await connection(client).request(RpcSubject.ADMISSION_GET, b"{}", timeout=5)
    await settle(connection(agent))

    assert reply.data == b"pods"
    assert reply.subject.startswith("_INBOX.client.")
    assert refusals(refusal_log) == {
        Refusal.of("subscription", "_INBOX.>"),
        Refusal.of("subscription", "_INBOX.client.>"),
    }
    assert every_inbox.pending_msgs == clients_inbox.pending_msgs == 0


async def test_only_the_migrate_user_changes_a_stream(connect, refusal_log):
    scheduler, migrate = await connect("scheduler"), await connect("migrate")
    await connection(scheduler).publish(f"$JS.API.STREAM.UPDATE.{EVENTS_STREAM}", b"{}")
    await connection(scheduler).publish(f"$JS.API.STREAM.DELETE.{EVENTS_STREAM}", b"")
    await settle(connection(scheduler))

    await ensure_streams(jetstream(migrate), stream_configs(duplicate_window_s=300))

    assert refusals(refusal_log) == {
        Refusal.of("publish", f"$JS.API.STREAM.UPDATE.{EVENTS_STREAM}"),
        Refusal.of("publish", f"$JS.API.STREAM.DELETE.{EVENTS_STREAM}"),
    }
    assert (await jetstream(scheduler).stream_info(EVENTS_STREAM)).config.duplicate_window == 300


async def test_a_leased_service_starts_on_provisioned_streams_without_any_right_to_change_them(
    connect, refusal_log
):
    """The scheduler's start-up only checks that its streams exist."""
    scheduler = await connect("scheduler")

    await require_streams(jetstream(scheduler), [EVENTS_STREAM, DLQ_STREAM])
    await settle(connection(scheduler))

    assert refusals(refusal_log) == set()


async def test_a_user_with_the_wrong_password_or_none_cannot_connect(secured_nats: SecuredNats):
    wrong = url_with_credentials(secured_nats.server.url, "client", "not-the-password")
    for url in (wrong, secured_nats.server.url):
        broker = make_broker(url, "intruder")
        with pytest.raises((nats.errors.Error, OSError)):
            await broker.connect()
        await broker.stop()

    broker = make_broker(secured_nats.url("migrate"), "migrate")  # the control: the right password connects
    await broker.connect()
    try:
        assert (await jetstream(broker).stream_info(EVENTS_STREAM)).config.name == EVENTS_STREAM
    finally:
        await broker.stop()
