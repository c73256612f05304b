"""Leader election on the fenced lease: one leader, standbys take over when its lease lapses."""

from datetime import UTC, datetime, timedelta

import pytest

from libs.db.records import Fence
from libs.db.testing import in_memory_unit_of_work_factory
from libs.runtime.leadership import LeaderElector

TTL = timedelta(seconds=10)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Replica:
    """An elector and the leadership changes it reported."""

    def __init__(self, factory, clock: Clock, holder: str) -> None:
        self.changes: list[str] = []
        self.elector = LeaderElector(
            factory, name="scheduler", holder=holder, ttl=TTL, clock=clock,
            on_elected=self._elected, on_deposed=self._deposed,
        )  # fmt: skip

    async def _elected(self, fence: Fence) -> None:
        self.changes.append(f"elected {fence.epoch}")

    async def _deposed(self) -> None:
        self.changes.append("deposed")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def factory(clock):
    async with in_memory_unit_of_work_factory(clock=clock) as made:
        yield made


async def test_the_first_replica_leads_and_a_second_stands_by(factory, clock):
    first, second = Replica(factory, clock, "a"), Replica(factory, clock, "b")

    await first.elector.tick()
    await second.elector.tick()

    assert first.changes == ["elected 1"]
    assert second.changes == []


async def test_a_leader_that_renews_keeps_its_epoch(factory, clock):
    first, second = Replica(factory, clock, "a"), Replica(factory, clock, "b")
    await first.elector.tick()
    for _ in range(5):
        clock.now += TTL / 2
        await first.elector.tick()
        await second.elector.tick()

    assert first.changes == ["elected 1"]
    assert second.changes == []


async def test_a_standby_takes_over_with_the_next_epoch_once_the_lease_lapses(factory, clock):
    first, second = Replica(factory, clock, "a"), Replica(factory, clock, "b")
    await first.elector.tick()

    clock.now += TTL + timedelta(seconds=1)
    await second.elector.tick()
    await first.elector.tick()

    assert second.changes == ["elected 2"]
    assert first.changes == ["elected 1", "deposed"]


async def test_stepping_down_lets_a_standby_take_over_without_waiting(factory, clock):
    first, second = Replica(factory, clock, "a"), Replica(factory, clock, "b")
    await first.elector.tick()

    await first.elector.step_down()
    await second.elector.tick()

    assert first.changes == ["elected 1", "deposed"]
    assert second.changes == ["elected 2"]


async def test_a_leader_that_lapsed_and_retook_its_lease_starts_a_new_term(factory, clock):
    first = Replica(factory, clock, "a")
    await first.elector.tick()

    clock.now += TTL + timedelta(seconds=1)
    await first.elector.tick()

    assert first.changes == ["elected 1", "deposed", "elected 2"]


class Flaky:
    """Units of work that fail to open while `failing` (the database locked or away), else the real ones."""

    def __init__(self, real) -> None:
        self.real = real
        self.failing = False

    def __call__(self):
        if self.failing:
            raise ConnectionError("database is locked")
        return self.real()


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def flaky_replica(factory, clock: Clock, monotonic: Monotonic) -> tuple[Replica, Flaky]:
    flaky = Flaky(factory)
    replica = Replica(flaky, clock, "a")
    replica.elector._monotonic = monotonic
    return replica, flaky


async def test_a_renewal_that_fails_while_the_lease_is_valid_keeps_the_leader(factory, clock):
    monotonic = Monotonic()
    leader, flaky = flaky_replica(factory, clock, monotonic)
    await leader.elector.tick()
    flaky.failing = True
    monotonic.now += TTL.total_seconds() / 2
    await leader.elector.tick()

    assert leader.changes == ["elected 1"]
    assert leader.elector.leading

    flaky.failing = False
    await leader.elector.tick()
    assert leader.changes == ["elected 1"]


async def test_renewals_that_keep_failing_until_the_lease_would_lapse_depose_the_leader(factory, clock):
    monotonic = Monotonic()
    leader, flaky = flaky_replica(factory, clock, monotonic)
    await leader.elector.tick()
    flaky.failing = True
    monotonic.now += TTL.total_seconds() + 0.1
    await leader.elector.tick()

    assert leader.changes == ["elected 1", "deposed"]
    assert not leader.elector.leading
