"""Quota reservation and flavor assignment: a whole gang fits nominal quota, borrows, or does not fit, in
Kueue's words."""

from __future__ import annotations

from libs.api.models.core import Taint, Toleration
from libs.core.quota import Mode, admit
from libs.core.quota.model import Flavor, FlavorFungibility, PodSetRequest, Preemption, WorkloadRequest
from libs.core.quota.snapshot import QuotaSnapshot
from tests.unit.quota.builders import GPU, at, gang, make_cohort, make_queue, running, snapshot


def test_a_gang_within_nominal_quota_fits_without_borrowing():
    decision = admit(snapshot([make_queue("team-a", 8)]), gang("team-a", 8))
    assert decision.mode is Mode.FIT
    assert decision.flavors == {"main": {GPU: "a100"}}
    assert decision.usage == {("a100", GPU): 8}
    assert not decision.borrows


def test_a_gang_borrows_what_its_cohort_leaves_idle():
    queues = [make_queue("team-a", 8), make_queue("team-b", 8)]
    decision = admit(snapshot(queues), gang("team-a", 12))
    assert decision.mode is Mode.FIT
    assert decision.borrows


def test_a_gang_that_does_not_fit_is_told_how_much_more_it_needs():
    queues = [make_queue("team-a", 8), make_queue("team-b", 8)]
    busy = snapshot(queues, [running("b-job", "team-b", 8)])
    decision = admit(busy, gang("team-a", 16))
    assert decision.mode is Mode.NO_FIT
    assert decision.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor a100, "
        "8 more needed"
    )


def test_a_gang_larger_than_any_quota_could_give_is_told_the_maximum():
    decision = admit(snapshot([make_queue("team-a", 8, cohort=None)]), gang("team-a", 9))
    assert decision.message == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100, "
        "previously considered podsets requests (0) + current podset request (9) > maximum capacity (8)"
    )


def test_the_borrowing_limit_caps_what_a_queue_takes_from_its_cohort():
    queues = [make_queue("team-a", 8, borrowing_limit=2), make_queue("team-b", 8)]
    assert admit(snapshot(queues), gang("team-a", 10)).mode is Mode.FIT
    assert admit(snapshot(queues), gang("team-a", 11)).mode is Mode.NO_FIT


def test_the_lending_limit_keeps_part_of_a_queues_quota_for_itself():
    queues = [make_queue("team-a", 8), make_queue("team-b", 8, lending_limit=2)]
    assert admit(snapshot(queues), gang("team-a", 10)).mode is Mode.FIT
    assert admit(snapshot(queues), gang("team-a", 11)).mode is Mode.NO_FIT


def test_a_cohorts_own_quota_is_a_pool_its_queues_share_and_its_parent_caps_it():
    cohorts = [make_cohort("research", parent="org", gpus=4, borrowing_limit=0), make_cohort("org")]
    queues = [make_queue("team-a", 8), make_queue("team-c", 8, cohort="org")]
    state = snapshot(queues, cohorts=cohorts)
    assert admit(state, gang("team-a", 12)).mode is Mode.FIT
    assert admit(state, gang("team-a", 13)).mode is Mode.NO_FIT  # research may not borrow team-c's quota


def test_the_first_flavor_that_fits_is_chosen_in_the_queues_order():
    queue = make_queue("team-a", {"a100": 4, "h100": 8}, cohort=None)
    assert admit(snapshot([queue]), gang("team-a", 4)).flavors == {"main": {GPU: "a100"}}
    assert admit(snapshot([queue]), gang("team-a", 6)).flavors == {"main": {GPU: "h100"}}


def test_borrowing_stops_the_search_unless_the_queue_tries_the_next_flavor():
    queues = [make_queue("team-a", {"a100": 4, "h100": 8}), make_queue("team-b", {"a100": 8, "h100": 0})]
    assert admit(snapshot(queues), gang("team-a", 6)).flavors == {"main": {GPU: "a100"}}
    try_next = FlavorFungibility(when_can_borrow="TryNextFlavor")
    queues[0] = make_queue("team-a", {"a100": 4, "h100": 8}, fungibility=try_next)
    decision = admit(snapshot(queues), gang("team-a", 6))
    assert decision.flavors == {"main": {GPU: "h100"}}
    assert not decision.borrows


def test_a_flavor_whose_taint_the_gang_does_not_tolerate_is_skipped():
    spot = Flavor("spot", node_taints=(Taint(key="spot", value="true", effect="NoSchedule"),))
    queue = make_queue("team-a", {"spot": 8, "a100": 8}, cohort=None)
    state = QuotaSnapshot([spot, Flavor("a100")], [], [queue])
    assert admit(state, gang("team-a", 4)).flavors == {"main": {GPU: "a100"}}
    tolerant = gang("team-a", 4, tolerations=(Toleration(key="spot", operator="Exists"),))
    assert admit(state, tolerant).flavors == {"main": {GPU: "spot"}}
    assert admit(
        QuotaSnapshot([spot], [], [make_queue("q", {"spot": 8}, cohort=None)]), gang("q", 1)
    ).message == (
        "couldn't assign flavors to pod set main: untolerated taint spot=true:NoSchedule in flavor spot"
    )


def test_a_node_selector_on_a_flavor_label_picks_the_flavor():
    state = QuotaSnapshot(
        [Flavor("a100", {"gpu": "a100"}), Flavor("h100", {"gpu": "h100"})],
        [],
        [make_queue("team-a", {"a100": 8, "h100": 8}, cohort=None)],
    )
    assert admit(state, gang("team-a", 2, node_selector={"gpu": "h100"})).flavors == {"main": {GPU: "h100"}}


def test_a_resource_the_queue_does_not_cover_does_not_fit():
    cpu_gang = WorkloadRequest("x", "team-a", 0, at(0), (PodSetRequest("main", 1, {"cpu": 1000}),))
    decision = admit(snapshot([make_queue("team-a", 8)]), cpu_gang)
    assert (
        decision.message
        == "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"
    )


def test_an_inactive_queue_admits_nothing():
    assert admit(snapshot([make_queue("team-a", 8, stopped=True)]), gang("team-a", 1)).message == (
        "ClusterQueue team-a is inactive: stopped"
    )
    cycle = [make_cohort("research", parent="org"), make_cohort("org", parent="research")]
    decision = admit(snapshot([make_queue("team-a", 8)], cohorts=cycle), gang("team-a", 1))
    assert decision.message == "ClusterQueue team-a is inactive: its cohort tree has a cycle"


def test_preemption_is_the_mode_when_a_policy_could_free_the_quota():
    queue = make_queue("team-a", 8, cohort=None, preemption=Preemption(within_cluster_queue="LowerPriority"))
    decision = admit(snapshot([queue], [running("low", "team-a", 8)]), gang("team-a", 4, priority=10))
    assert decision.mode is Mode.PREEMPT
    assert decision.needs_preemption == {("a100", GPU)}
