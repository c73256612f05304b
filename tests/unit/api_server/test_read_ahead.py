"""Pages read ahead of a paginated list's client: each taken once, forgotten after their time, at most so
many kept, and a failed read taken as no page (the caller asks again)."""

from __future__ import annotations

import asyncio

import orjson

from libs.events.rpc import FramedPage
from services.api_server.read_ahead import ReadAhead


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def page(*names: str) -> FramedPage:
    return FramedPage([orjson.dumps({"metadata": {"name": n}}) for n in names], [1] * len(names), None, 1)


async def test_a_page_read_ahead_is_taken_once() -> None:
    ahead = ReadAhead(clock=Clock())
    reads = []

    async def read() -> FramedPage:
        reads.append(1)
        return page("a")

    ahead.start("next", read)
    ahead.start("next", read)  # already under way: not read twice

    assert await ahead.take("next") == page("a")
    assert await ahead.take("next") is None
    assert reads == [1]


async def test_a_page_nobody_took_in_time_is_forgotten_and_its_read_cancelled() -> None:
    clock = Clock()
    ahead = ReadAhead(ttl_s=30, clock=clock)
    never = asyncio.Event()

    async def slow() -> FramedPage:
        await never.wait()
        return page("late")

    ahead.start("slow", slow)
    await asyncio.sleep(0)
    clock.now += 31

    assert await ahead.take("slow") is None


async def test_only_the_newest_pages_are_kept() -> None:
    ahead = ReadAhead(kept=2, clock=Clock())

    def reading(name: str):
        async def read() -> FramedPage:
            return page(name)

        return read

    for name in ("one", "two", "three"):
        ahead.start(name, reading(name))

    assert await ahead.take("one") is None
    assert await ahead.take("two") == page("two")
    assert await ahead.take("three") == page("three")


async def test_a_read_that_failed_is_no_page() -> None:
    ahead = ReadAhead(clock=Clock())

    async def broken() -> FramedPage:
        raise RuntimeError("admission did not answer")

    ahead.start("broken", broken)

    assert await ahead.take("broken") is None


async def test_closing_cancels_what_is_under_way() -> None:
    ahead = ReadAhead(clock=Clock())
    never = asyncio.Event()

    async def slow() -> FramedPage:
        await never.wait()
        return page("x")

    ahead.start("slow", slow)
    ahead.close()

    assert await ahead.take("slow") is None
