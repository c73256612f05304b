"""router-evidence turns the deployment of each answer into per-second shares and the times to move and return."""

from __future__ import annotations

import argparse
from collections import Counter

from bench.router_evidence import FAST, SLOW, _figures, add_arguments


def drill_args(**overrides: float) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    for name, value in {"normal_s": 3.0, "slow_s": 5.0, "recovered_s": 4.0, **overrides}.items():
        setattr(args, name, value)
    return args


def answers(shares_fast: list[float], per_second: int = 20) -> list[tuple[float, str]]:
    served = []
    for second, share in enumerate(shares_fast):
        fast = round(share * per_second)
        served += [(second + i / per_second, FAST if i < fast else SLOW) for i in range(per_second)]
    return served


def test_the_times_to_move_and_to_return_count_from_each_change() -> None:
    #          normal ....... slow ......................... recovered ...........
    shares = [0.5, 0.5, 0.5, 0.6, 0.8, 0.95, 1.0, 1.0, 0.9, 0.85, 0.5, 0.5]
    figures = _figures(drill_args(), answers(shares), Counter())
    assert figures["share_fast_per_second"] == shares
    assert figures["moved_90_s"] == 3
    assert figures["moved_90_within_target"] is True
    assert figures["returned_s"] == 3  # 0.85 leaves 0.15 on the recovered one: under the 25 % that counts
    assert figures["answers"] == 20 * len(shares)


def test_traffic_that_never_moves_reports_none() -> None:
    figures = _figures(drill_args(), answers([0.5] * 12), Counter({502: 3}))
    assert figures["moved_90_s"] is None
    assert figures["moved_90_within_target"] is False
    assert figures["errors"] == {502: 3}
