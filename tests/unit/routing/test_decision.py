"""The decision for one request: weighted route, ordered candidates, spillover and failover labels."""

from __future__ import annotations

from collections import Counter

from libs.core.routing import (
    DeploymentHealth,
    FailureReason,
    RouteWalk,
    RoutingTable,
    SkipReason,
    SpilloverReason,
    build_health,
    parse_policy,
)
from tests.unit.routing.policies import example_document, make_policy, single_route_policy


def names(table: RoutingTable, feature: str, request_id: str) -> list[str]:
    return [c.name for c in table.plan(feature, request_id).candidates]


def test_route_choice_is_deterministic_per_request_id_and_follows_weights() -> None:
    table = RoutingTable(make_policy())
    picks = Counter(table.plan("search-answer", f"req-{i}").route_index for i in range(10_000))
    assert 8_800 < picks[0] < 9_200
    assert all(
        table.plan("search-answer", "req-7").route_index == table.plan("search-answer", "req-7").route_index
        for _ in range(3)
    )


def test_sync_chain_is_each_model_pt_then_od() -> None:
    table = RoutingTable(single_route_policy("gemini-flash", "claude-haiku"))
    assert names(table, "search-answer", "r") == [
        "gemini-flash-pt",
        "gemini-flash-od",
        "claude-haiku-pt",
        "claude-haiku-od",
    ]


def test_pt_is_ordered_first_even_when_the_model_lists_od_first() -> None:
    document = example_document()
    document["models"]["gemini-flash"] = ["gemini-flash-od", "gemini-flash-pt"]
    table = RoutingTable(parse_policy(document))
    assert names(table, "channel-recap", "r") == ["claude-haiku-od", "gemini-flash-od"]
    assert names(table, "search-answer", "r")[:2] in (
        ["gemini-flash-pt", "gemini-flash-od"],
        ["claude-haiku-pt", "claude-haiku-od"],
    )


def test_async_chain_goes_to_on_demand_directly() -> None:
    table = RoutingTable(make_policy())
    assert names(table, "channel-recap", "r") == ["claude-haiku-od", "gemini-flash-od"]


def walk_for(
    policy_models: tuple[str, ...] = ("gemini-flash", "claude-haiku"),
    estimate: int = 100,
    **policy_kwargs: object,
) -> tuple[RouteWalk, dict[str, DeploymentHealth]]:
    policy = single_route_policy(*policy_models, **policy_kwargs)  # type: ignore[arg-type]
    health = build_health(policy, {}, now=0.0)
    plan = RoutingTable(policy).plan("search-answer", "r")
    return RouteWalk(plan, health, estimate), health


def test_first_dispatch_is_pt_with_capacity_reserved() -> None:
    walk, health = walk_for()
    dispatch = walk.next(0.0)
    assert dispatch is not None
    assert dispatch.candidate.name == "gemini-flash-pt"
    assert dispatch.reservation is not None
    assert dispatch.spillover is None
    assert dispatch.failover is None
    tracker = health["gemini-flash-pt"].tracker
    assert tracker is not None
    assert tracker.snapshot(0.0).in_flight == 1


def test_pt_without_capacity_spills_to_od_with_reason_pt_capacity() -> None:
    walk, _health = walk_for(estimate=400_000)
    dispatch = walk.next(0.0)
    assert dispatch is not None
    assert dispatch.candidate.name == "gemini-flash-od"
    assert dispatch.reservation is None
    assert dispatch.spillover is not None
    assert (
        dispatch.spillover.from_deployment,
        dispatch.spillover.to_deployment,
        dispatch.spillover.reason,
    ) == ("gemini-flash-pt", "gemini-flash-od", SpilloverReason.PT_CAPACITY)
    assert [s.reason for s in walk.skips] == [SkipReason.PT_CAPACITY]


def test_pt_exhausted_at_the_provider_spills_to_the_same_models_od() -> None:
    walk, _ = walk_for()
    first = walk.next(0.0)
    assert first is not None
    walk.failed(first.candidate, FailureReason.PT_EXHAUSTED)
    second = walk.next(0.0)
    assert second is not None
    assert second.candidate.name == "gemini-flash-od"
    assert second.spillover is not None
    assert second.spillover.reason is SpilloverReason.PT_EXHAUSTED
    assert second.failover is None


def test_od_failure_fails_over_to_the_next_model_on_the_other_cloud() -> None:
    walk, _ = walk_for()
    first = walk.next(0.0)
    assert first is not None
    walk.failed(first.candidate, FailureReason.PT_EXHAUSTED)
    second = walk.next(0.0)
    assert second is not None
    walk.failed(second.candidate, FailureReason.UNAVAILABLE)
    third = walk.next(0.0)
    assert third is not None
    assert third.candidate.name == "claude-haiku-pt"
    assert third.failover is not None
    assert (third.failover.from_deployment, third.failover.reason) == (
        "gemini-flash-od",
        FailureReason.UNAVAILABLE,
    )


def test_open_breaker_is_skipped_and_asks_for_a_probe_once_due() -> None:
    walk, health = walk_for()
    breaker = health["gemini-flash-pt"].breaker
    for _ in range(5):
        breaker.record_failure(0.0)
    dispatch = walk.next(0.0)
    assert dispatch is not None
    assert dispatch.candidate.name == "gemini-flash-od"
    assert dispatch.spillover is not None
    assert dispatch.spillover.reason is SpilloverReason.PT_BREAKER_OPEN
    assert walk.probes_due == []
    later, _ = (
        RouteWalk(RoutingTable(single_route_policy("gemini-flash")).plan("search-answer", "r"), health, 1),
        None,
    )
    assert later.next(5.0) is not None
    assert later.probes_due == ["gemini-flash-pt"]


def test_walk_ends_when_every_candidate_is_refused() -> None:
    walk, health = walk_for(("gemini-flash",))
    for name in ("gemini-flash-pt", "gemini-flash-od"):
        for _ in range(5):
            health[name].breaker.record_failure(0.0)
    assert walk.next(1.0) is None
    assert [s.deployment for s in walk.skips] == ["gemini-flash-pt", "gemini-flash-od"]


def test_reload_keeps_state_of_unchanged_deployments_only() -> None:
    policy = make_policy()
    health = build_health(policy, {}, now=0.0)
    document = example_document()
    document["deployments"]["gemini-flash-pt"]["capacity"]["tokens_per_minute"] = 1000
    reloaded = build_health(parse_policy(document), health, now=1.0)
    assert reloaded["claude-haiku-pt"] is health["claude-haiku-pt"]
    assert reloaded["gemini-flash-pt"] is not health["gemini-flash-pt"]


def open_breaker_of(health: dict[str, DeploymentHealth], name: str) -> None:
    for _ in range(health[name].breaker.settings.consecutive_failures):
        health[name].breaker.record_failure(0.0)


def test_a_move_past_a_full_pt_and_an_open_od_to_another_model_is_a_failover() -> None:
    walk, health = walk_for(estimate=400_000)  # more than gemini-flash-pt's 300,000 tokens a minute
    open_breaker_of(health, "gemini-flash-od")
    dispatch = walk.next(0.0)
    assert dispatch is not None
    assert dispatch.candidate.name == "claude-haiku-pt"
    assert dispatch.spillover is None
    assert dispatch.failover is not None
    assert (dispatch.failover.from_deployment, dispatch.failover.reason) == (
        "gemini-flash-od",
        SkipReason.BREAKER_OPEN,
    )


def test_a_full_pt_of_a_model_without_on_demand_fails_over_to_the_next_model() -> None:
    document = example_document()
    document["models"]["gemini-flash"] = ["gemini-flash-pt"]
    document["features"]["search-answer"]["routes"] = [
        {"weight": 1, "models": ["gemini-flash", "claude-haiku"]}
    ]
    policy = parse_policy(document)
    walk = RouteWalk(RoutingTable(policy).plan("search-answer", "r"), build_health(policy, {}, 0.0), 350_000)
    dispatch = walk.next(0.0)
    assert dispatch is not None
    assert dispatch.candidate.name == "claude-haiku-pt"
    assert dispatch.spillover is None
    assert dispatch.failover is not None
    assert (dispatch.failover.from_deployment, dispatch.failover.reason) == (
        "gemini-flash-pt",
        SkipReason.PT_CAPACITY,
    )


def test_a_move_from_one_pt_to_another_pt_of_the_same_model_is_a_failover() -> None:
    document = example_document()
    document["deployments"]["gemini-flash-pt-2"] = dict(document["deployments"]["gemini-flash-pt"])
    document["deployments"]["gemini-flash-pt-2"]["capacity"] = {"tokens_per_minute": 1_000_000}
    document["models"]["gemini-flash"] = ["gemini-flash-pt", "gemini-flash-pt-2", "gemini-flash-od"]
    document["features"]["search-answer"]["routes"] = [{"weight": 1, "models": ["gemini-flash"]}]
    policy = parse_policy(document)
    walk = RouteWalk(RoutingTable(policy).plan("search-answer", "r"), build_health(policy, {}, 0.0), 350_000)
    dispatch = walk.next(0.0)
    assert dispatch is not None
    assert dispatch.candidate.name == "gemini-flash-pt-2"
    assert dispatch.spillover is None
    assert dispatch.failover is not None
    assert dispatch.failover.reason is SkipReason.PT_CAPACITY


def test_an_on_demand_deployment_behind_an_open_breaker_fails_over_to_the_next_model() -> None:
    policy = make_policy()
    health = build_health(policy, {}, 0.0)
    open_breaker_of(health, "claude-haiku-od")
    walk = RouteWalk(RoutingTable(policy).plan("channel-recap", "r"), health, 100)
    dispatch = walk.next(0.0)
    assert dispatch is not None
    assert dispatch.candidate.name == "gemini-flash-od"
    assert dispatch.failover is not None
    assert (dispatch.failover.from_deployment, dispatch.failover.reason) == (
        "claude-haiku-od",
        SkipReason.BREAKER_OPEN,
    )


def test_an_error_on_pt_that_is_not_about_capacity_fails_over_to_the_same_models_od() -> None:
    walk, _ = walk_for()
    first = walk.next(0.0)
    assert first is not None
    walk.failed(first.candidate, FailureReason.UNAVAILABLE)
    second = walk.next(0.0)
    assert second is not None
    assert second.candidate.name == "gemini-flash-od"
    assert second.spillover is None
    assert second.failover is not None
    assert (second.failover.from_deployment, second.failover.reason) == (
        "gemini-flash-pt",
        FailureReason.UNAVAILABLE,
    )


def test_a_failure_names_the_move_even_when_deployments_after_it_are_skipped() -> None:
    walk, health = walk_for()
    first = walk.next(0.0)
    assert first is not None
    walk.failed(first.candidate, FailureReason.PT_EXHAUSTED)
    open_breaker_of(health, "gemini-flash-od")
    second = walk.next(0.0)
    assert second is not None
    assert second.candidate.name == "claude-haiku-pt"
    assert second.spillover is None
    assert second.failover is not None
    assert (second.failover.from_deployment, second.failover.reason) == (
        "gemini-flash-pt",
        FailureReason.PT_EXHAUSTED,
    )


def half_open(health: dict[str, DeploymentHealth], *names: str) -> None:
    for name in names:
        breaker = health[name].breaker
        for _ in range(breaker.settings.consecutive_failures):
            breaker.record_failure(0.0)
        assert breaker.probe_due(5.0)
        breaker.record_probe(True, 5.0)


def test_with_every_candidate_half_open_a_request_the_ramp_holds_back_is_still_sent() -> None:
    _, health = walk_for(("gemini-flash",))
    half_open(health, "gemini-flash-pt", "gemini-flash-od")
    plan = RoutingTable(single_route_policy("gemini-flash")).plan("search-answer", "r")
    firsts = [RouteWalk(plan, health, 100).next(5.1) for _ in range(2)]
    assert [d.candidate.name for d in firsts if d] == ["gemini-flash-pt", "gemini-flash-od"]  # first slots
    walk = RouteWalk(plan, health, 100)
    held_back = walk.next(5.2)
    assert held_back is not None
    assert held_back.candidate.name == "gemini-flash-pt"
    assert held_back.reservation is not None
    assert (held_back.spillover, held_back.failover) == (None, None)
    assert [s.deployment for s in walk.skips] == ["gemini-flash-od"]


def test_a_held_back_request_goes_past_an_open_breaker_as_a_spillover() -> None:
    _, health = walk_for(("gemini-flash",))
    half_open(health, "gemini-flash-od")
    for _ in range(5):
        health["gemini-flash-pt"].breaker.record_failure(5.0)
    plan = RoutingTable(single_route_policy("gemini-flash")).plan("search-answer", "r")
    assert RouteWalk(plan, health, 100).next(5.1) is not None
    dispatch = RouteWalk(plan, health, 100).next(5.2)
    assert dispatch is not None
    assert dispatch.candidate.name == "gemini-flash-od"
    assert dispatch.spillover is not None
    assert dispatch.spillover.reason is SpilloverReason.PT_BREAKER_OPEN


def test_an_open_breaker_is_never_a_last_resort() -> None:
    walk, health = walk_for(("gemini-flash",))
    for name in ("gemini-flash-pt", "gemini-flash-od"):
        for _ in range(5):
            health[name].breaker.record_failure(0.0)
    assert walk.next(1.0) is None
