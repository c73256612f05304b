"""The scheduler state machine alone, driven by the same inputs the running services consumed, binds the
same pods to the same nodes and devices.

A scripted sequence runs through the real stack (admission, scheduler and node agent on a nats-server and a
database), each step waiting until it has settled. The audit log then holds, in commit order, every event
the scheduler consumed; they are fed to a fresh state machine step by step, on a clock taken from the
events' own times, with a pass after each step.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from libs.core.scheduling import SchedulerStateMachine
from libs.core.scheduling.inputs import World
from libs.core.scheduling.outputs import Binding, CycleRan
from libs.events.envelope import Envelope
from libs.events.registry import parse_payload
from services.scheduler.handlers import SUBJECTS, machine_input
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.support import eventually

RACK = "topology.example.com/rack"
BLOCK = "topology.example.com/block"
CONSUMED = {subject.removeprefix("podway.events.") for subject in SUBJECTS}

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


async def settle(stack: Stack, seq: int, done: Any) -> int:
    """Wait until the events after `seq` satisfy `done`; returns the last seq."""
    events = await eventually(lambda: log_after(stack, seq), done, timeout_s=30)
    assert done(events), [e["type"] for e in events]
    return int(events[-1]["seq"])


def count(events: list[dict[str, Any]], kind: str) -> int:
    return sum(1 for event in events if event["type"] == kind)


async def test_the_core_alone_binds_what_the_services_bound_for_the_same_inputs(stack: Stack):
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
        seq = await settle(stack, seq, lambda events, n=bound: count(events, "pods.bound") >= n)
        steps.append(seq)
    # The rack gang finishes; a gang that needs its room arrives; one that cannot fit waits.
    stack.agent_clock.advance(timedelta(seconds=31))
    stack.agent.wake()
    seq = await settle(stack, seq, lambda events: count(events, "pods.succeeded") >= 1)
    steps.append(seq)
    await stack.client.apply(gang("after", 6, gpus=8, topology_key=BLOCK))
    seq = await settle(stack, seq, lambda events: count(events, "pods.bound") >= 1)
    steps.append(seq)
    await stack.client.apply(gang("too-big", 12, gpus=8, topology_key=RACK))
    seq = await settle(stack, seq, lambda events: count(events, "podgroup.unschedulable") >= 1)
    steps.append(seq)

    history = await log_after(stack, 0)
    services_bound = bound_in([e for e in history if e["seq"] > start])
    core_bound, core_unschedulable = replay(history, steps)

    assert len(services_bound) == 4 + 8 + 1 + 16 + 6
    assert core_bound == services_bound
    assert core_unschedulable == {f"{NAMESPACE}/too-big"}


def replay(history: list[dict[str, Any]], steps: list[int]) -> tuple[Bound, set[str]]:
    machine = SchedulerStateMachine()
    machine.load(World([], {}), now=0.0)
    bound: Bound = {}
    unschedulable: set[str] = set()
    feed = [event for event in history if event["type"] in CONSUMED]
    position = 0
    now = 0.0
    for boundary in steps:
        while position < len(feed) and feed[position]["seq"] <= boundary:
            event = feed[position]
            position += 1
            envelope = Envelope.model_validate({k: v for k, v in event.items() if k != "seq"})
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
