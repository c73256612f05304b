"""A feature's A/B split ends by evidence: a sequential test on feedback scores names the better route."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from libs.core.routing import FeatureExperiment, PolicyError, RoutingTable, parse_policy
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
