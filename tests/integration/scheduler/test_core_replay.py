"""The scheduler state machine alone, driven by the same inputs the running services consumed, binds the
same pods to the same nodes and devices.

A scripted sequence runs through the real stack (admission, scheduler and node agent on a nats-server and a
database), each step waiting until it has settled and the scheduler has consumed everything published. The
events stream then holds, in the order the scheduler consumed them (which is not the audit log's commit
order: each process publishes its own commits), every event it consumed; they are fed to a fresh state
machine step by step, on a clock taken from the events' own times, with a pass after each step.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from nats.js import JetStreamContext

from libs.core.scheduling import SchedulerStateMachine
from libs.core.scheduling.inputs import World
from libs.core.scheduling.outputs import Binding, CycleRan
from libs.events.catalogue import EVENTS_STREAM
from libs.events.envelope import Envelope
from libs.events.registry import parse_payload
from services.scheduler.handlers import SUBJECTS, machine_input
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.support import eventually

RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
CONSUMED = set(SUBJECTS)

Bound = dict[str, tuple[str, tuple[str, ...]]]
"""Pod name -> (node, GPUs)."""


async def log_after(stack: Stack, seq: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while True:
        page = await stack.client.events(after_seq=seq)
        if not page.events:
            return events
        events += page.events
        seq = page.last_seq


def bound_in(events: list[dict[str, Any]]) -> Bound:
    return {
        placement["pod"]: (placement["node"], tuple(placement["devices"].get("gpu.example.com", [])))
        for event in events
        if event["type"] == "pods.bound"
        for placement in event["payload"]["pods"]
    }


async def settle(stack: Stack, js: JetStreamContext, seq: int, done: Any) -> tuple[int, int]:
    """Wait until the events after `seq` satisfy `done` and the scheduler has consumed every event
    committed so far; returns the audit log's last seq and the stream's."""
    events = await eventually(lambda: log_after(stack, seq), done, timeout_s=30)
    assert done(events), [e["type"] for e in events]
    logged = len(await log_after(stack, 0))
    stream = await eventually(lambda: consumed(js, logged), lambda last: last > 0, timeout_s=30)
    assert stream > 0
    return int(events[-1]["seq"]), stream


async def consumed(js: JetStreamContext, logged: int) -> int:
    """The stream's last seq once it holds every logged event and the scheduler has acked them all, else 0."""
    state = (await js.stream_info(EVENTS_STREAM)).state
    info = await js.consumer_info(EVENTS_STREAM, "scheduler")
    done = state.messages >= logged and info.num_pending == 0 and info.num_ack_pending == 0
    return int(state.last_seq) if done else 0


async def stream_events(js: JetStreamContext, last: int) -> list[tuple[int, Envelope]]:
    """Every event the stream holds up to `last`, with its stream seq, in stream order."""
    found = []
    for seq in range(1, last + 1):
        message = await js.get_msg(EVENTS_STREAM, seq)
        if message.subject in CONSUMED:
            found.append((seq, Envelope.from_bytes(message.data or b"")))
    return found


def count(events: list[dict[str, Any]], kind: str) -> int:
    return sum(1 for event in events if event["type"] == kind)


async def test_the_core_alone_binds_what_the_services_bound_for_the_same_inputs(
    stack: Stack, js: JetStreamContext
):
    start = int((await log_after(stack, 0))[-1]["seq"])
    steps: list[int] = []
    scripted = [
        (gang("rack-gang", 4, gpus=2, topology_key=RACK, run_seconds=30), 1),
        (gang("block-gang", 8, gpus=4, topology_key=BLOCK), 1),
        ([pod("solo", gpus=3, node_selector={"topology.example.com/block": "zone-0-b1"})], 1),
        (gang("wide", 16, gpus=8), 1),
    ]
    seq = start
    for manifests, bound in scripted:
        await stack.client.apply(manifests)
        seq, stream = await settle(stack, js, seq, lambda events, n=bound: count(events, "pods.bound") >= n)
        steps.append(stream)
    # The rack gang finishes; a gang that needs its room arrives; one that cannot fit waits.
    stack.agent_clock.advance(timedelta(seconds=31))
    stack.agent.wake()
    seq, stream = await settle(stack, js, seq, lambda events: count(events, "pods.succeeded") >= 1)
    steps.append(stream)
    await stack.client.apply(gang("after", 6, gpus=8, topology_key=BLOCK))
    seq, stream = await settle(stack, js, seq, lambda events: count(events, "pods.bound") >= 1)
    steps.append(stream)
    await stack.client.apply(gang("too-big", 12, gpus=8, topology_key=RACK))
    seq, stream = await settle(stack, js, seq, lambda events: count(events, "podgroup.unschedulable") >= 1)
    steps.append(stream)

    history = await log_after(stack, 0)
    services_bound = bound_in([e for e in history if e["seq"] > start])
    core_bound, core_unschedulable = replay(await stream_events(js, steps[-1]), steps)

    assert len(services_bound) == 4 + 8 + 1 + 16 + 6
    assert core_bound == services_bound
    assert core_unschedulable == {f"{NAMESPACE}/too-big"}


def replay(feed: list[tuple[int, Envelope]], steps: list[int]) -> tuple[Bound, set[str]]:
    machine = SchedulerStateMachine()
    machine.load(World([], {}), now=0.0)
    bound: Bound = {}
    unschedulable: set[str] = set()
    position = 0
    now = 0.0
    for boundary in steps:
        while position < len(feed) and feed[position][0] <= boundary:
            envelope = feed[position][1]
            position += 1
            now = envelope.occurred_at.timestamp()
            machine_event = machine_input(envelope, parse_payload(envelope))
            if machine_event is not None:
                machine.handle(machine_event, now=now)
        for output in machine.run_pass(now):
            binding = output.bind if isinstance(output, CycleRan) else output
            if isinstance(binding, Binding):
                for placement in binding.placements:
                    gpus = tuple(placement.devices.get("gpu.example.com", ()))
                    bound[placement.pod_name] = (placement.node_name, gpus)
            elif isinstance(output, CycleRan) and not output.decision.placed:
                unschedulable.add(output.decision.podgroup)
    return bound, unschedulable
