"""How fairly teams shared the fleet: Jain's index, usage and shares over time, the saturated time, and the
waits of gangs reclaiming their nominal quota."""

from __future__ import annotations

import numpy as np
import pytest

from libs.core.simulation.fairness import (
    GangUse,
    PodUse,
    dominant_shares,
    fairness_when_saturated,
    jain_index,
    reclaim_waits,
    team_series,
    unallocated_when_saturated,
)
from libs.core.simulation.tenants import FleetCapacity, Team

TEAMS = (Team("light", 1), Team("heavy", 3))
FLEET = FleetCapacity(cpu_milli=100_000, memory_mib=1_000_000, gpus=8)


def test_jain_index_is_one_for_equal_values_and_one_over_n_when_one_has_everything():
    assert jain_index([0.3, 0.3, 0.3]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain_index([1.0, 3.0]) == pytest.approx(16 / 20)
    assert jain_index([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError):
        jain_index([])


def test_usage_and_waiting_follow_arrivals_binds_and_ends():
    pods = {
        "l1": PodUse("light", 2, 10_000, 100),
        "h1": PodUse("heavy", 4, 80_000, 100),
        "h2": PodUse("heavy", 2, 1_000, 100),
    }
    arrived = {"l1": 0.0, "h1": 0.0, "h2": 5.0, "not-a-team-pod": 1.0}
    series = team_series(TEAMS, pods, arrived, [(1.0, "l1"), (2.0, "h1")], [(10.0, "l1")])

    assert series.times.tolist() == [0.0, 1.0, 2.0, 5.0, 10.0]
    assert series.usage[:, 0, 0].tolist() == [0, 2, 2, 2, 0]  # light's GPUs
    assert series.usage[:, 1, 0].tolist() == [0, 0, 4, 4, 4]
    assert series.waiting_gpus[:, 1].tolist() == [4, 4, 0, 2, 2]
    shares = dominant_shares(series, FLEET)
    assert shares[2].tolist() == pytest.approx([0.25, 0.8])  # heavy's dominant resource is its CPU
    assert series.at(2.0) == 1  # the state just before the instant
    assert series.at(0.0) == -1


def test_jain_is_taken_over_backlogged_teams_while_demand_exceeds_the_fleet():
    pods = {f"l{i}": PodUse("light", 1, 0, 0) for i in range(6)} | {
        f"h{i}": PodUse("heavy", 1, 0, 0) for i in range(10)
    }
    arrived = dict.fromkeys(pods, 0.0)
    # light holds 2 GPUs and heavy 6 (their weights' shares) for 10 s, then light 6 and heavy 2 for 10 s.
    binds = [(0.0, p) for p in ("l0", "l1", "h0", "h1", "h2", "h3", "h4", "h5")]
    ends = [(10.0, p) for p in ("h2", "h3", "h4", "h5")]
    binds += [(10.0, p) for p in ("l2", "l3", "l4", "l5")]
    series = team_series(TEAMS, pods, arrived, binds, ends)

    fairness = fairness_when_saturated(series, FLEET, until=20.0)

    assert fairness.saturated_s == 20.0  # 16 GPUs asked for, 8 in the fleet
    assert fairness.contended_s == 10.0  # from 10 s on, light has nothing left waiting
    assert fairness.jain == pytest.approx(1.0)
    assert fairness_when_saturated(series, FLEET, until=10.0).saturated_s == 10.0
    assert unallocated_when_saturated(series, FLEET, until=20.0) == pytest.approx(0.0)


def test_unequal_weighted_shares_lower_the_index_and_an_unsaturated_fleet_has_none():
    pods = {f"l{i}": PodUse("light", 1, 0, 0) for i in range(6)} | {
        f"h{i}": PodUse("heavy", 1, 0, 0) for i in range(6)
    }
    arrived = dict.fromkeys(pods, 0.0)
    binds = [(0.0, p) for p in ("l0", "l1", "l2", "l3", "h0", "h1", "h2")]  # 4 and 3 of 8: one idle
    series = team_series(TEAMS, pods, arrived, binds, [])

    fairness = fairness_when_saturated(series, FLEET, until=5.0)

    assert fairness.jain == pytest.approx(jain_index([4 / 8 / 1, 3 / 8 / 3]))
    assert unallocated_when_saturated(series, FLEET, until=5.0) == pytest.approx(1.0)
    idle = team_series(TEAMS, {"l0": pods["l0"]}, {"l0": 0.0}, [(0.0, "l0")], [])
    assert unallocated_when_saturated(idle, FLEET, until=5.0) is None
    assert fairness_when_saturated(idle, FLEET, until=5.0).contended_s == 0.0
    assert fairness_when_saturated(idle, FLEET, until=5.0).jain is None


def test_reclaim_waits_count_gangs_arriving_within_their_nominal_quota_while_another_team_borrows():
    pods = {f"h{i}": PodUse("heavy", 1, 0, 0) for i in range(8)}
    arrived = dict.fromkeys(pods, 0.0)
    series = team_series(TEAMS, pods, arrived, [(0.0, p) for p in pods], [])  # heavy borrows 2
    nominal = {"light": 2, "heavy": 6}
    gangs = [
        GangUse("light", 5.0, 2, 12.0),  # within light's nominal quota: counted
        GangUse("light", 6.0, 3, 9.0),  # would pass it: not counted
        GangUse("light", 7.0, 1, None),  # never placed: counted apart
        GangUse("heavy", 8.0, 1, 8.0),  # heavy is the borrower
    ]

    waits, never = reclaim_waits(series, gangs, nominal)

    assert waits == [7.0]
    assert never == 1
    assert reclaim_waits(series, gangs, {"light": 2, "heavy": 8}) == ([], 0)  # nobody borrows
    assert np.isfinite(waits).all()
