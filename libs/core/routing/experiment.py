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

A fleet of router processes runs one test per experiment: each process counts the scores it was given (its
own tally) and adds every peer's latest tally (`merge_peer`), so the test sees the whole fleet's feedback; a
tally outlives its process (a restarted process `resume`s its own), and the first conclusion stored for an
experiment is the fleet's (`adopt`). An experiment is named by `key`: its feature, its arms and its settings;
other edits of the feature (weights, deadline, budget) keep its feedback.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
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
    key: str = ""


@dataclass(frozen=True, slots=True)
class Tally:
    """Feedback scores one process counted for each arm: how many, and their sum."""

    counts: tuple[int, ...]
    sums: tuple[float, ...]

    @classmethod
    def empty(cls, arms: int) -> Tally:
        return cls((0,) * arms, (0.0,) * arms)

    def fits(self, arms: int) -> bool:
        return len(self.counts) == len(self.sums) == arms and all(count >= 0 for count in self.counts)


@dataclass(frozen=True, slots=True)
class ExperimentRecord:
    """The fleet's record of one experiment (one key-value record per experiment key): every process's tally
    and, once one concluded, the winner and the process that stored it first."""

    feature: str
    tallies: Mapping[str, Tally]
    winner: int | None = None
    concluded_by: str | None = None

    def with_tally(self, instance: str, tally: Tally) -> ExperimentRecord:
        return ExperimentRecord(
            self.feature, {**self.tallies, instance: tally}, self.winner, self.concluded_by
        )

    def concluded(self, winner: int, instance: str) -> ExperimentRecord:
        """This record with `winner`, unless a winner is stored already (the first stays)."""
        if self.winner is not None:
            return self
        return ExperimentRecord(self.feature, self.tallies, winner, instance)

    def to_json(self) -> bytes:
        tallies = {name: {"counts": t.counts, "sums": t.sums} for name, t in sorted(self.tallies.items())}
        document = {
            "feature": self.feature,
            "tallies": tallies,
            "winner": self.winner,
            "concluded_by": self.concluded_by,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ExperimentRecord:
        """Raises ValueError when `data` is not a record."""
        try:
            document = json.loads(data)
            tallies = {
                str(name): Tally(tuple(int(c) for c in t["counts"]), tuple(float(x) for x in t["sums"]))
                for name, t in document["tallies"].items()
            }
            winner = document.get("winner")
            by = document.get("concluded_by")
            return cls(
                str(document["feature"]),
                tallies,
                int(winner) if winner is not None else None,
                str(by) if by is not None else None,
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not an experiment record: {exc}") from exc


def experiment_key(name: str, feature: Feature) -> str:
    """What names an experiment across processes and restarts: its feature, arms and settings, hashed."""
    assert feature.experiment is not None
    identity = {
        "feature": name,
        "arms": [list(route.models) for route in feature.routes],
        "experiment": feature.experiment.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


class FeatureExperiment:
    """The feedback of one feature's routes, and its winner once the test concludes (see the module)."""

    __slots__ = (
        "_counts",
        "_delta",
        "_feature",
        "_min_feedback",
        "_models",
        "_peers",
        "_sums",
        "changed",
        "key",
        "name",
        "winner",
    )

    def __init__(self, name: str, feature: Feature) -> None:
        assert feature.experiment is not None
        self.name = name
        self.key = experiment_key(name, feature)
        self._feature = feature
        self._delta = 1.0 - feature.experiment.confidence
        self._min_feedback = feature.experiment.min_feedback
        firsts = [route.models[0] for route in feature.routes]
        self._models = {model: index for index, model in enumerate(firsts) if firsts.count(model) == 1}
        self._counts = [0] * len(feature.routes)
        self._sums = [0.0] * len(feature.routes)
        self._peers: dict[str, Tally] = {}
        self.changed = False
        """Whether the own tally moved since it was last shared."""
        self.winner: int | None = None

    @property
    def feature(self) -> Feature:
        """The feature definition the feedback was gathered under."""
        return self._feature

    @property
    def arms(self) -> int:
        return len(self._counts)

    def record(self, model: str, score: float) -> ExperimentConclusion | None:
        """A feedback score for an answer `model` gave; the conclusion when this score ends the split."""
        arm = self._models.get(model)
        if arm is None or self.winner is not None:
            return None
        self._counts[arm] += 1
        self._sums[arm] += score
        self.changed = True
        return self._test()

    def own_tally(self) -> Tally:
        return Tally(tuple(self._counts), tuple(self._sums))

    def resume(self, tally: Tally) -> None:
        """Start from what this process had counted before it restarted (scores since are kept too)."""
        if tally.fits(self.arms):
            self._counts = [a + b for a, b in zip(self._counts, tally.counts, strict=True)]
            self._sums = [a + b for a, b in zip(self._sums, tally.sums, strict=True)]

    def merge_peer(self, instance: str, tally: Tally) -> ExperimentConclusion | None:
        """A peer's latest tally replaces its previous one; the conclusion when the fleet's feedback ends the
        split here."""
        if not tally.fits(self.arms) or self.winner is not None:
            return None
        self._peers[instance] = tally
        return self._test()

    def adopt(self, winner: int) -> None:
        """The fleet's conclusion (the first stored) overrides any this process reached on its own."""
        if 0 <= winner < self.arms:
            self.winner = winner

    def totals(self) -> Tally:
        """The feedback the test counts: this process's and every peer's latest tally."""
        counts, sums = self._totals()
        return Tally(tuple(counts), tuple(sums))

    def _totals(self) -> tuple[list[int], list[float]]:
        counts, sums = list(self._counts), list(self._sums)
        for tally in self._peers.values():
            for arm in range(self.arms):
                counts[arm] += tally.counts[arm]
                sums[arm] += tally.sums[arm]
        return counts, sums

    def _test(self) -> ExperimentConclusion | None:
        counts, sums = self._totals()
        if min(counts) < self._min_feedback:
            return None
        bounds = [_bounds(counts[arm], sums[arm], self.arms, self._delta) for arm in range(self.arms)]
        for index, (lower, _) in enumerate(bounds):
            if all(lower > upper for other, (_, upper) in enumerate(bounds) if other != index):
                self.winner = index
                return self._conclusion(counts, sums, bounds)
        return None

    def _conclusion(
        self, counts: Sequence[int], sums: Sequence[float], bounds: list[tuple[float, float]]
    ) -> ExperimentConclusion:
        assert self.winner is not None
        arms = tuple(
            ArmStanding(
                route_index=index,
                models=self._feature.routes[index].models,
                feedback_count=counts[index],
                feedback_mean=sums[index] / counts[index],
                lower=max(lower, 0.0),
                upper=min(upper, 1.0),
            )
            for index, (lower, upper) in enumerate(bounds)
        )
        return ExperimentConclusion(self.name, self.winner, 1.0 - self._delta, arms, self.key)


class FleetExperiments:
    """What the fleet knows of experiments, kept across policy generations (an experiment this policy does not
    run yet may be run by the next): peers' tallies, this process's tallies from before a restart, and the
    conclusions stored for the fleet. `build` makes a generation's experiments from it."""

    def __init__(self) -> None:
        self._peers: dict[str, dict[str, Tally]] = {}
        self._resumed: dict[str, Tally] = {}
        self._winners: dict[str, int] = {}
        self.experiments: dict[str, FeatureExperiment] = {}
        """The experiments in force, by feature."""

    def build(self, features: Mapping[str, Feature]) -> dict[str, FeatureExperiment]:
        """One experiment per feature that asks for one; an experiment whose key is unchanged is kept (its
        feedback and winner). Becomes the experiments in force."""
        previous = {experiment.key: experiment for experiment in self.experiments.values()}
        built: dict[str, FeatureExperiment] = {}
        for name, feature in features.items():
            if feature.experiment is None:
                continue
            key = experiment_key(name, feature)
            experiment = previous.get(key)
            if experiment is None:
                experiment = FeatureExperiment(name, feature)
                self._apply_known(experiment)
            built[name] = experiment
        self.experiments = built
        return built

    def _apply_known(self, experiment: FeatureExperiment) -> None:
        resumed = self._resumed.get(experiment.key)
        if resumed is not None:
            experiment.resume(resumed)
        for instance, tally in self._peers.get(experiment.key, {}).items():
            experiment.merge_peer(instance, tally)
        winner = self._winners.get(experiment.key)
        if winner is not None:
            experiment.adopt(winner)

    def by_key(self, key: str) -> FeatureExperiment | None:
        return next((e for e in self.experiments.values() if e.key == key), None)

    def merge_peer(self, key: str, instance: str, tally: Tally) -> ExperimentConclusion | None:
        self._peers.setdefault(key, {})[instance] = tally
        experiment = self.by_key(key)
        return experiment.merge_peer(instance, tally) if experiment is not None else None

    def resume(self, key: str, tally: Tally) -> None:
        self._resumed[key] = tally
        experiment = self.by_key(key)
        if experiment is not None:
            experiment.resume(tally)

    def adopt(self, key: str, winner: int) -> None:
        self._winners[key] = winner
        experiment = self.by_key(key)
        if experiment is not None:
            experiment.adopt(winner)


def _bounds(count: int, total: float, arms: int, delta: float) -> tuple[float, float]:
    mean = total / count
    radius = confidence_radius(count, arms, delta)
    return mean - radius, mean + radius


def confidence_radius(count: int, arms: int, delta: float) -> float:
    """Half-width of an arm's anytime interval after `count` scores in [0, 1] (see the module)."""
    return math.sqrt(math.log(math.pi**2 * arms * count**2 / (3.0 * delta)) / (2.0 * count))
