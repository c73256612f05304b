"""A leased service consumes only what it keeps: a leader whose lease was taken while it was paused gives
back the events it applied, and its successor sees every one of them."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from libs.db.ports import UnitOfWork
from libs.db.records import Fence
from libs.events.catalogue import EventType
from libs.events.envelope import Envelope, EventPayload
from libs.events.scheduling import PodRef, PodsSucceeded
from libs.leasing.leased_service import LeasedService
from libs.messaging.broker import make_broker
from libs.messaging.publisher import NatsPublisher
from libs.runtime.settings import PodwaySettings
from tests.conftest import FakeClock
from tests.integration.db.builders import T0
from tests.integration.messaging.conftest import eventually, running

LEASE_SECONDS = 60.0
"""Long, so that the paused leader's own renewals do not notice the takeover during the test."""


class Recorder(LeasedService[list[str], str]):
    """A leased service whose world is the ids of the events it applied."""

    name = "recorder"
    subjects = (EventType.PODS_SUCCEEDED.subject,)
    applied: list[str]

    async def load(self, uow: UnitOfWork, now: float) -> list[str]:
        return []

    def apply(self, world: list[str], envelope: Envelope, payload: EventPayload, now: float) -> None:
        world.append(str(envelope.event_id))
        self.applied = [*getattr(self, "applied", []), str(envelope.event_id)]

    def run_pass(self, world: list[str], now: float) -> list[str]:
        return []

    def next_wakeup(self, world: list[str]) -> float | None:
        return None

    async def write(self, uow: UnitOfWork, outputs: list[str], fence: Fence) -> None:
        return None


def pod_succeeded(index: int) -> Envelope:
    pods = [PodRef(namespace="ml", name=f"p-{index}", uid=f"uid-{index}")]
    return Envelope.wrap(
        PodsSucceeded(pods=pods), producer="node-agent", correlation_id=f"uid-{index}", occurred_at=T0
    )


async def test_a_leader_whose_lease_was_taken_gives_back_what_it_applied_and_the_new_leader_sees_it(
    nats_url, database_url, tmp_path
):
    settings = PodwaySettings(nats_url=nats_url, database_url=database_url, lease_seconds=LEASE_SECONDS)
    clock = FakeClock()
    paused = Recorder(settings, clock=clock, holder="paused")
    successor = Recorder(settings.model_copy(update={"instance": "1"}), clock=clock, holder="successor")
    await paused.start()
    try:
        await eventually(lambda: _world_ready(paused))
        # The leader froze past its lease, and the successor took the lease meanwhile (epoch 2).
        clock.advance(timedelta(seconds=LEASE_SECONDS + 1))
        async with successor.plain_uow() as uow:
            taken = await uow.leases.acquire_or_renew("recorder", "successor", clock(), timedelta(minutes=5))
            await uow.commit()
        assert taken is not None
        assert taken.epoch == 2
        # It resumes, still believing it leads, and its consumer fetches what is published now.
        sent = [pod_succeeded(index) for index in range(20)]
        async with running(make_broker(nats_url, "test-publisher")) as broker:
            publisher = NatsPublisher(broker)
            for envelope in sent:
                await publisher.publish(envelope)
        await eventually(lambda: _applied_some(paused))

        await successor.start()

        expected = {str(envelope.event_id) for envelope in sent}
        # An event the server handed to the paused leader's last pull request as it stopped comes back only
        # after the consumer's ack wait, a lease (the request outlives its consumer on the server): late,
        # never lost.
        await eventually(lambda: _has_all(successor, expected), within_s=paused.ack_wait_s + 15)
    finally:
        await successor.stop()
        await paused.stop()


async def _world_ready(service: Recorder) -> bool:
    return service.world is not None


async def _applied_some(service: Recorder) -> bool:
    return bool(getattr(service, "applied", None))


async def _has_all(service: Recorder, expected: set[str]) -> bool:
    return service.world is not None and expected <= set(service.world)


class SwallowsOneCancellation(Recorder):
    """A service whose pass waits in `observe` until cancelled and swallows the first cancellation, as
    `asyncio.wait_for` may on Python 3.11."""

    observe_every_s = 0.0
    swallowed = 0
    inside = False

    async def observe(self, world: list[str], now: float) -> None:
        self.inside = True
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self.swallowed:
                raise
            self.swallowed += 1
        finally:
            self.inside = False


async def test_a_term_that_swallowed_its_cancellation_still_ends_when_leadership_ends(
    nats_url, database_url, tmp_path
):
    settings = PodwaySettings(nats_url=nats_url, database_url=database_url, lease_seconds=LEASE_SECONDS)
    service = SwallowsOneCancellation(settings, clock=FakeClock(), holder="only")
    await service.start()
    try:
        await eventually(lambda: _observing(service))
        await asyncio.wait_for(service._deposed(), timeout=10)
        assert service.swallowed == 1
        assert service.world is None
    finally:
        await service.stop()


async def _observing(service: SwallowsOneCancellation) -> bool:
    return service.inside
