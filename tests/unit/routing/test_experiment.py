"""A feature's A/B split ends by evidence: a sequential test on feedback scores names the better route."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from libs.api.router_policy.policy import Feature
from libs.core.routing import (
    ExperimentRecord,
    FeatureExperiment,
    FleetExperiments,
    PolicyError,
    RoutingTable,
    Tally,
    experiment_key,
    parse_policy,
)
from libs.core.routing.experiment import confidence_radius
from tests.unit.routing.policies import example_document

# search-answer's routes: 0 prefers gemini-flash (weight 90), 1 prefers claude-haiku (weight 10).
ARM_MODELS = ("gemini-flash", "claude-haiku")


def experiment(confidence: float = 0.95, min_feedback: int = 30) -> FeatureExperiment:
    document = example_document()
    document["features"]["search-answer"]["experiment"] = {
        "confidence": confidence,
        "min_feedback": min_feedback,
    }
    policy = parse_policy(document)
    return FeatureExperiment("search-answer", policy.features["search-answer"])


def feed(test: FeatureExperiment, means: tuple[float, float], rounds: int, seed: int = 7) -> int | None:
    """Thumbs (1 or 0) drawn with each arm's mean, alternating arms; the round that concluded, if any."""
    draw = random.Random(seed)
    for round_number in range(rounds):
        for arm, mean in enumerate(means):
            if test.record(ARM_MODELS[arm], 1.0 if draw.random() < mean else 0.0) is not None:
                return round_number
    return None


def test_the_better_route_wins() -> None:
    test = experiment()
    assert feed(test, (0.55, 0.85), rounds=2_000) is not None
    assert test.winner == 1


def test_it_does_not_conclude_before_each_route_has_its_minimum_of_feedback() -> None:
    test = experiment(min_feedback=200)
    for _ in range(500):
        assert test.record("gemini-flash", 0.0) is None
    for _ in range(199):
        assert test.record("claude-haiku", 1.0) is None
    conclusion = test.record("claude-haiku", 1.0)
    assert conclusion is not None
    assert conclusion.winner == 1


def test_it_does_not_conclude_while_the_intervals_overlap() -> None:
    test = experiment(confidence=0.99)
    assert feed(test, (0.70, 0.72), rounds=300) is None
    assert test.winner is None


def test_a_higher_confidence_needs_more_feedback() -> None:
    rounds = [feed(experiment(confidence=c), (0.5, 0.8), rounds=5_000, seed=3) for c in (0.8, 0.999)]
    assert rounds[0] is not None
    assert rounds[1] is not None
    assert rounds[0] < rounds[1]


def test_equal_routes_are_rarely_told_apart() -> None:
    """Two equal arms: a conclusion is a mistake, bounded by 1 - confidence (here, over 200 runs)."""
    mistakes = sum(
        feed(experiment(confidence=0.9), (0.6, 0.6), rounds=400, seed=s) is not None for s in range(200)
    )
    assert mistakes <= 0.1 * 200


def test_feedback_for_a_model_no_route_prefers_is_not_counted() -> None:
    test = experiment(min_feedback=1)
    for _ in range(100):
        assert test.record("some-other-model", 1.0) is None
    assert test.winner is None


def test_the_conclusion_names_the_winner_and_every_route_standing() -> None:
    test = experiment(min_feedback=40)
    conclusion = None
    for _ in range(40):
        test.record("gemini-flash", 1.0)
        conclusion = test.record("claude-haiku", 0.0)
    assert conclusion is not None
    assert conclusion.winner == 0
    assert test.winner == 0
    assert conclusion.confidence == pytest.approx(0.95)
    assert [(a.route_index, a.models[0], a.feedback_count) for a in conclusion.arms] == [
        (0, "gemini-flash", 40),
        (1, "claude-haiku", 40),
    ]
    assert conclusion.arms[0].lower > conclusion.arms[1].upper
    # after the conclusion, feedback changes nothing
    assert test.record("claude-haiku", 1.0) is None


def test_after_the_conclusion_every_request_goes_to_the_winner() -> None:
    table = RoutingTable(parse_policy(example_document()))
    before = Counter(table.plan("search-answer", f"req-{i}").route_index for i in range(1_000))
    after = Counter(table.plan("search-answer", f"req-{i}", winner=1).route_index for i in range(1_000))
    assert before[0] > 800
    assert after == Counter({1: 1_000})


@pytest.mark.parametrize("count", [1, 10, 100, 10_000])
def test_the_interval_narrows_with_feedback(count: int) -> None:
    assert confidence_radius(count * 10, 2, 0.05) < confidence_radius(count, 2, 0.05)


@pytest.mark.parametrize(
    "routes",
    [
        [{"weight": 1, "models": ["gemini-flash"]}],
        [
            {"weight": 1, "models": ["gemini-flash"]},
            {"weight": 1, "models": ["gemini-flash", "claude-haiku"]},
        ],
    ],
)
def test_an_experiment_needs_routes_that_feedback_can_tell_apart(routes: list[dict[str, object]]) -> None:
    document = example_document()
    document["features"]["search-answer"]["experiment"] = {"confidence": 0.9}
    document["features"]["search-answer"]["routes"] = routes
    with pytest.raises(PolicyError) as caught:
        parse_policy(document)
    assert str(caught.value).startswith("features.search-answer.experiment: needs two or more routes")


def feature(document: dict[str, object]) -> Feature:
    return parse_policy(document).features["search-answer"]


def experiment_document(**changes: object) -> dict[str, Any]:
    document = example_document()
    search = document["features"]["search-answer"]
    search["experiment"] = {"confidence": 0.95, "min_feedback": 30}
    search.update(changes)
    return document


def test_the_experiment_key_follows_the_arms_and_settings_not_the_weights_or_deadline() -> None:
    base = experiment_key("search-answer", feature(experiment_document()))
    reweighted = experiment_document(deadline_ms=9_000)
    reweighted["features"]["search-answer"]["routes"][0]["weight"] = 50
    assert experiment_key("search-answer", feature(reweighted)) == base
    assert experiment_key("other-name", feature(experiment_document())) != base
    stricter = experiment_document(experiment={"confidence": 0.99, "min_feedback": 30})
    assert experiment_key("search-answer", feature(stricter)) != base
    rearmed = experiment_document()
    rearmed["features"]["search-answer"]["routes"][1]["models"] = ["claude-haiku"]
    assert experiment_key("search-answer", feature(rearmed)) != base


def test_the_fleets_feedback_concludes_where_no_process_alone_could() -> None:
    """Each process was given scores for one route only: only their sum has every route's minimum."""
    first, second = FleetExperiments(), FleetExperiments()
    policy = parse_policy(experiment_document())
    (a,), (b,) = first.build(policy.features).values(), second.build(policy.features).values()
    for _ in range(40):
        assert a.record("gemini-flash", 0.0) is None
        assert b.record("claude-haiku", 1.0) is None
    conclusion = first.merge_peer(a.key, "second", b.own_tally())
    assert conclusion is not None
    assert (conclusion.winner, conclusion.key) == (1, a.key)
    assert [arm.feedback_count for arm in conclusion.arms] == [40, 40]
    second.adopt(b.key, conclusion.winner)
    assert b.winner == 1


def test_a_peers_newer_tally_replaces_its_older_one() -> None:
    fleet = FleetExperiments()
    (test,) = fleet.build(parse_policy(experiment_document()).features).values()
    for count in range(1, 60):  # the same peer reporting its growing tally: 59 scores, not 1+2+...+59
        fleet.merge_peer(test.key, "peer", Tally((count, 0), (float(count), 0.0)))
    for _ in range(29):
        test.record("claude-haiku", 0.0)
    assert test.winner is None
    conclusion = test.record("claude-haiku", 0.0)
    assert conclusion is not None
    assert [arm.feedback_count for arm in conclusion.arms] == [59, 30]


def test_a_rebuilt_generation_keeps_what_the_fleet_knew_and_a_restarted_process_resumes() -> None:
    fleet = FleetExperiments()
    policy = parse_policy(experiment_document())
    (test,) = fleet.build(policy.features).values()
    fleet.resume(test.key, Tally((30, 0), (27.0, 0.0)))
    assert test.own_tally().counts == (30, 0)
    reweighted = experiment_document()
    reweighted["features"]["search-answer"]["routes"][0]["weight"] = 50
    (kept,) = fleet.build(parse_policy(reweighted).features).values()
    assert kept is test
    fleet.build(parse_policy(example_document()).features)  # the experiment taken out of the policy
    fleet.adopt(test.key, 1)
    (back,) = fleet.build(policy.features).values()  # and put back: the stored tally and winner hold
    assert back is not test
    assert (back.own_tally().counts, back.winner) == ((30, 0), 1)


def test_an_experiment_record_round_trips_keeps_the_first_winner_and_refuses_garbage() -> None:
    record = ExperimentRecord("search-answer", {}).with_tally("a", Tally((3, 4), (1.5, 2.0)))
    record = record.concluded(1, "a").concluded(0, "b")
    assert ExperimentRecord.from_json(record.to_json()) == record
    assert (record.winner, record.concluded_by) == (1, "a")
    for garbage in (b"{", b"[]", b'{"feature": "x"}', b'{"feature": "x", "tallies": {"a": {"counts": 1}}}'):
        with pytest.raises(ValueError, match="not an experiment record"):
            ExperimentRecord.from_json(garbage)
