"""A feature's A/B split ended by evidence: a sequential best-arm test on the callers' feedback scores.

Each route of the split is an arm; a feedback score in [0, 1] for an answer counts for the route whose first
model gave it (a route is named by the model it prefers; an answer from a model no route, or more than one
route, starts with says nothing about the split and is not counted).

The rule (successive elimination with anytime Hoeffding intervals): after n scores an arm's mean lies within
    r(n) = sqrt(ln(pi^2 k n^2 / (3 delta)) / (2 n))
of its true mean, for every n and all k arms at once, with probability at least 1 - delta, delta = 1 -
confidence (Hoeffding's bound for scores in [0, 1], spent over the arms and over n as 6 / (pi^2 n^2)). The
split concludes when every arm has at least `min_feedback` scores and one arm's lower bound is above every
other arm's upper bound: it names a worse arm the winner with probability at most delta, however often it is
checked. Until then the weights hold; after, all traffic goes to the winner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from libs.api.router_policy.policy import Feature


@dataclass(frozen=True, slots=True)
class ArmStanding:
    """One route's feedback when the split concluded."""

    route_index: int
    models: tuple[str, ...]
    feedback_count: int
    feedback_mean: float
    lower: float
    upper: float


@dataclass(frozen=True, slots=True)
class ExperimentConclusion:
    """The split of `feature` ended: `winner` (a route index) takes all its traffic from now on."""

    feature: str
    winner: int
    confidence: float
    arms: tuple[ArmStanding, ...]


class FeatureExperiment:
    """The feedback of one feature's routes, and its winner once the test concludes (see the module)."""

    __slots__ = ("_counts", "_delta", "_feature", "_min_feedback", "_models", "_sums", "name", "winner")

    def __init__(self, name: str, feature: Feature) -> None:
        assert feature.experiment is not None
        self.name = name
        self._feature = feature
        self._delta = 1.0 - feature.experiment.confidence
        self._min_feedback = feature.experiment.min_feedback
        firsts = [route.models[0] for route in feature.routes]
        self._models = {model: index for index, model in enumerate(firsts) if firsts.count(model) == 1}
        self._counts = [0] * len(feature.routes)
        self._sums = [0.0] * len(feature.routes)
        self.winner: int | None = None

    @property
    def feature(self) -> Feature:
        """The feature definition the feedback was gathered under."""
        return self._feature

    def record(self, model: str, score: float) -> ExperimentConclusion | None:
        """A feedback score for an answer `model` gave; the conclusion when this score ends the split."""
        arm = self._models.get(model)
        if arm is None or self.winner is not None:
            return None
        self._counts[arm] += 1
        self._sums[arm] += score
        if min(self._counts) < self._min_feedback:
            return None
        bounds = [self._bounds(index) for index in range(len(self._counts))]
        for index, (lower, _) in enumerate(bounds):
            if all(lower > upper for other, (_, upper) in enumerate(bounds) if other != index):
                self.winner = index
                return self._conclusion(bounds)
        return None

    def _bounds(self, arm: int) -> tuple[float, float]:
        count = self._counts[arm]
        mean = self._sums[arm] / count
        radius = confidence_radius(count, len(self._counts), self._delta)
        return mean - radius, mean + radius

    def _conclusion(self, bounds: list[tuple[float, float]]) -> ExperimentConclusion:
        assert self.winner is not None
        arms = tuple(
            ArmStanding(
                route_index=index,
                models=self._feature.routes[index].models,
                feedback_count=self._counts[index],
                feedback_mean=self._sums[index] / self._counts[index],
                lower=max(lower, 0.0),
                upper=min(upper, 1.0),
            )
            for index, (lower, upper) in enumerate(bounds)
        )
        return ExperimentConclusion(self.name, self.winner, 1.0 - self._delta, arms)


def confidence_radius(count: int, arms: int, delta: float) -> float:
    """Half-width of an arm's anytime interval after `count` scores in [0, 1] (see the module)."""
    return math.sqrt(math.log(math.pi**2 * arms * count**2 / (3.0 * delta)) / (2.0 * count))
