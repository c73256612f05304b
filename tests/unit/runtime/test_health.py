"""Health beats: a service beats while it can do its work, and stops when its connections are gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from libs.runtime.health import beat_forever, last_beat


async def test_a_service_beats_while_alive_and_stops_beating_when_its_connection_is_gone(tmp_path: Path):
    path = tmp_path / "svc.health"
    alive = iter([True, False, False, False])
    beats: list[float | None] = []

    async def next_round(_: float) -> None:
        beats.append(last_beat(path))
        if len(beats) == 4:
            raise asyncio.CancelledError

    await beat_forever(path, alive=lambda: next(alive), sleep=next_round)

    assert beats[0] is not None
    assert beats[1:] == [beats[0]] * 3  # no beat once it is not alive


@pytest.mark.parametrize("alive", [None, lambda: True])
async def test_a_service_without_a_check_or_alive_beats_every_round(tmp_path: Path, alive):
    path = tmp_path / "svc.health"
    rounds = 0

    async def next_round(_: float) -> None:
        nonlocal rounds
        rounds += 1
        path.unlink()
        if rounds == 3:
            raise asyncio.CancelledError

    await beat_forever(path, alive=alive, sleep=next_round)

    assert rounds == 3
