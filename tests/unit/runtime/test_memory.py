"""Collector tuning for long-running services."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from libs.runtime.memory import YOUNG_THRESHOLD, freeze_long_lived, tune_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_tuning_makes_young_collections_rarer(restored_collector: None) -> None:
    tune_collector()

    assert gc.get_threshold()[0] == YOUNG_THRESHOLD > 700


def test_state_alive_at_freeze_is_out_of_the_collectors_reach(restored_collector: None) -> None:
    state = [{"node": i} for i in range(1000)]
    before = gc.get_freeze_count()

    freeze_long_lived()

    assert gc.get_freeze_count() >= before + len(state)


def test_a_service_every_request_waits_on_has_more_frequent_shorter_middle_collections(
    restored_collector: None,
) -> None:
    tune_collector()
    throughput = gc.get_threshold()
    tune_collector(short_pauses=True)
    short = gc.get_threshold()

    assert short[0] == throughput[0]
    assert short[1] < throughput[1]
