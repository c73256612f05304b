"""The apply batcher: group commits, pipelined only when groups cannot see each other's writes."""

from __future__ import annotations

import asyncio

from libs.events.rpc import ApplyReply
from services.admission.batcher import ApplyBatcher, Footprint

FOOTPRINTS = {
    "gang-a": Footprint(reads={"pg/a", "pod/a", "wl/train"}, writes={"pg/a", "pod/a"}),
    "gang-b": Footprint(reads={"pg/b", "pod/b", "wl/train"}, writes={"pg/b", "pod/b"}),
    "gang-c": Footprint(reads={"pg/c", "pod/c"}, writes={"pg/c", "pod/c"}),
    "gang-d": Footprint(reads={"pg/d", "pod/d"}, writes={"pg/d", "pod/d"}),
    "train-v2": Footprint(reads={"wl/train"}, writes={"wl/train"}),
    "priority-class": None,
}


class Recorder:
    """An apply_group that holds every group until the test opens its gate."""

    def __init__(self) -> None:
        self.started: list[list[str]] = []
        self.gates: dict[str, asyncio.Event] = {}

    async def __call__(self, group: list[str]) -> list[ApplyReply]:
        self.started.append(group)
        gate = self.gates.setdefault(group[0], asyncio.Event())
        await gate.wait()
        return [ApplyReply(request_id=item, results=[]) for item in group]

    def open(self, first_item: str) -> None:
        self.gates.setdefault(first_item, asyncio.Event()).set()


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def run_batcher(recorder: Recorder) -> tuple[ApplyBatcher[str], asyncio.Task[None]]:
    batcher: ApplyBatcher[str] = ApplyBatcher(recorder, footprint_of=FOOTPRINTS.__getitem__, depth=2)
    return batcher, asyncio.create_task(batcher.run())


async def test_groups_that_touch_different_gangs_are_written_at_the_same_time() -> None:
    recorder = Recorder()
    batcher, runner = await run_batcher(recorder)
    first = asyncio.create_task(batcher.submit("gang-a"))
    await settle()
    second = asyncio.create_task(batcher.submit("gang-b"))
    await settle()

    assert recorder.started == [["gang-a"], ["gang-b"]]  # b decided while a was still committing
    recorder.open("gang-b")
    recorder.open("gang-a")
    assert (await first).request_id == "gang-a"
    assert (await second).request_id == "gang-b"
    runner.cancel()


async def test_a_group_that_writes_what_another_reads_waits_for_it() -> None:
    recorder = Recorder()
    batcher, runner = await run_batcher(recorder)
    first = asyncio.create_task(batcher.submit("gang-a"))
    await settle()
    update = asyncio.create_task(batcher.submit("train-v2"))
    await settle()

    assert recorder.started == [["gang-a"]]
    recorder.open("gang-a")
    await first
    await settle()
    assert recorder.started == [["gang-a"], ["train-v2"]]
    recorder.open("train-v2")
    await update
    runner.cancel()


async def test_a_priority_class_change_is_written_alone() -> None:
    recorder = Recorder()
    batcher, runner = await run_batcher(recorder)
    first = asyncio.create_task(batcher.submit("gang-a"))
    await settle()
    change = asyncio.create_task(batcher.submit("priority-class"))
    await settle()

    assert recorder.started == [["gang-a"]]
    recorder.open("gang-a")
    recorder.open("priority-class")
    await asyncio.gather(first, change)
    assert recorder.started == [["gang-a"], ["priority-class"]]
    runner.cancel()


async def test_requests_that_arrive_while_a_group_commits_are_written_together() -> None:
    recorder = Recorder()
    batcher: ApplyBatcher[str] = ApplyBatcher(recorder, depth=1)
    runner = asyncio.create_task(batcher.run())
    first = asyncio.create_task(batcher.submit("gang-a"))
    await settle()
    later = [asyncio.create_task(batcher.submit(name)) for name in ("gang-b", "train-v2")]
    await settle()
    recorder.open("gang-a")
    await first
    await settle()

    assert recorder.started == [["gang-a"], ["gang-b", "train-v2"]]
    recorder.open("gang-b")
    await asyncio.gather(*later)
    runner.cancel()


async def test_a_group_starts_beside_another_only_once_enough_requests_wait() -> None:
    recorder = Recorder()
    batcher: ApplyBatcher[str] = ApplyBatcher(
        recorder, footprint_of=FOOTPRINTS.__getitem__, depth=2, overlap_from=2
    )
    runner = asyncio.create_task(batcher.run())
    first = asyncio.create_task(batcher.submit("gang-a"))
    await settle()
    alone = asyncio.create_task(batcher.submit("gang-b"))
    await settle()
    assert recorder.started == [["gang-a"]]  # one waiting: it goes in the next group

    recorder.open("gang-a")
    await first
    await settle()
    assert recorder.started == [["gang-a"], ["gang-b"]]
    queued = [asyncio.create_task(batcher.submit(name)) for name in ("gang-c", "gang-d")]
    await settle()
    assert recorder.started == [["gang-a"], ["gang-b"], ["gang-c", "gang-d"]]  # two wait: beside gang-b
    recorder.open("gang-b")
    recorder.open("gang-c")
    await asyncio.gather(alone, *queued)
    runner.cancel()


async def test_idle_while_no_apply_waits_or_is_being_written() -> None:
    recorder = Recorder()
    batcher, runner = await run_batcher(recorder)
    assert batcher.idle
    answered = asyncio.create_task(batcher.submit("gang-a"))
    await settle()
    assert not batcher.idle  # being written

    recorder.open("gang-a")
    await answered
    await settle()

    assert batcher.idle  # its group finished, though no later group has taken its place yet
    assert batcher.groups_started == 1
    runner.cancel()
