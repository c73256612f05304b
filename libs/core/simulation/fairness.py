"""How fairly teams shared the fleet in a replay: each team's usage and waiting demand over time, its
dominant resource share, Jain's fairness index over the saturated periods, and how long a team waited to get
its nominal quota back.

A team's dominant resource share is the largest, over GPUs, CPU and memory, of what its pods on nodes use
per unit of the fleet's capacity (Dominant Resource Fairness). The fleet is saturated while the GPUs the
teams' pods use or wait for exceed the fleet's. Jain's index, (Σx)² / (n Σx²), is 1 when every x is equal
and 1/n when one takes all; here x is a share divided by its team's weight, over the teams with pods
waiting (a team that asks for nothing more is not held back by the others), so 1 means the backlogged teams
hold the fleet in proportion to their weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .tenants import FleetCapacity, Team

FloatArray = npt.NDArray[np.float64]

_ARRIVE, _BIND, _END = 0, 1, 2
"""Order of events at one instant: a pod arrives, then binds, then ends."""


@dataclass(frozen=True, slots=True)
class PodUse:
    """What a quota-managed pod of a team uses once bound: whole GPUs, millicores, MiB."""

    team: str
    gpus: int
    cpu_milli: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class TeamSeries:
    """Per team, after each instant something changed: resources used by its bound pods (GPUs, millicores,
    MiB) and GPUs its waiting pods ask for."""

    teams: tuple[Team, ...]
    times: FloatArray
    """[T] virtual seconds."""
    usage: FloatArray
    """[T, teams, 3]: GPUs, millicores, MiB in use."""
    waiting_gpus: FloatArray
    """[T, teams]."""

    def at(self, time: float) -> int:
        """The index of the state just before `time` (-1: before anything happened)."""
        return int(np.searchsorted(self.times, time, side="left")) - 1


def jain_index(values: Sequence[float] | FloatArray) -> float:
    """Jain's fairness index of non-negative values: 1 when all are equal, 1/n when one has everything
    (1 for all zero, nothing being unequal)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError("Jain's index of no values")
    squares = float(np.square(array).sum())
    if squares == 0:
        return 1.0
    return float(array.sum() ** 2 / (array.size * squares))


def team_series(
    teams: Sequence[Team],
    pods: Mapping[str, PodUse],
    arrived: Mapping[str, float],
    binds: Sequence[tuple[float, str]],
    ends: Sequence[tuple[float, str]],
) -> TeamSeries:
    """Usage and waiting demand per team after each instant of the replay, from each pod's arrival, bind
    and end (pods not in `pods` are not counted)."""
    index = {team.name: i for i, team in enumerate(teams)}
    events = sorted(
        [(t, _ARRIVE, uid) for uid, t in arrived.items() if uid in pods]
        + [(t, _BIND, uid) for t, uid in binds if uid in pods]
        + [(t, _END, uid) for t, uid in ends if uid in pods]
    )
    usage = np.zeros((len(teams), 3))
    waiting = np.zeros(len(teams))
    times: list[float] = []
    usages: list[FloatArray] = []
    waits: list[FloatArray] = []
    for position, (time, kind, uid) in enumerate(events):
        pod = pods[uid]
        team = index[pod.team]
        vector = np.array([pod.gpus, pod.cpu_milli, pod.memory_mib], dtype=np.float64)
        if kind == _ARRIVE:
            waiting[team] += pod.gpus
        elif kind == _BIND:
            waiting[team] -= pod.gpus
            usage[team] += vector
        else:
            usage[team] -= vector
        if position + 1 == len(events) or events[position + 1][0] != time:
            times.append(time)
            usages.append(usage.copy())
            waits.append(waiting.copy())
    return TeamSeries(
        tuple(teams),
        np.array(times, dtype=np.float64),
        np.array(usages, dtype=np.float64).reshape(len(times), len(teams), 3),
        np.array(waits, dtype=np.float64).reshape(len(times), len(teams)),
    )


def dominant_shares(series: TeamSeries, capacity: FleetCapacity) -> FloatArray:
    """[T, teams]: each team's dominant resource share of the fleet after each instant."""
    fleet = np.array([capacity.gpus, capacity.cpu_milli, capacity.memory_mib], dtype=np.float64)
    return np.asarray((series.usage / np.maximum(fleet, 1)).max(axis=2), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Fairness:
    """Jain's index of weight-normalised shares, time-weighted over the saturated instants at which two or
    more teams had pods waiting, and how long those lasted."""

    jain: float | None
    """None when no two teams waited together while the fleet was saturated: nothing to compare."""
    saturated_s: float
    contended_s: float
    """Of the saturated time, how long two or more teams had pods waiting (where the index is taken)."""


def fairness_when_saturated(series: TeamSeries, capacity: FleetCapacity, *, until: float) -> Fairness:
    """Jain's index of share/weight over the backlogged teams, weighted by how long each state lasted, over
    the saturated time before `until`."""
    times = series.times
    if times.size == 0:
        return Fairness(None, 0.0, 0.0)
    spans = np.diff(np.append(np.minimum(times, until), until)).clip(min=0)
    shares = dominant_shares(series, capacity)
    weights = np.array([team.weight for team in series.teams], dtype=np.float64)
    demand = series.usage[:, :, 0].sum(axis=1) + series.waiting_gpus.sum(axis=1)
    saturated = demand > capacity.gpus
    total = weighted = contended = 0.0
    for i in np.flatnonzero(saturated & (spans > 0)):
        total += spans[i]
        backlogged = series.waiting_gpus[i] > 0
        if backlogged.sum() < 2:
            continue
        contended += spans[i]
        weighted += spans[i] * jain_index(shares[i][backlogged] / weights[backlogged])
    return Fairness(weighted / contended if contended else None, float(total), float(contended))


def unallocated_when_saturated(series: TeamSeries, capacity: FleetCapacity, *, until: float) -> float | None:
    """The fleet's GPUs left unallocated, time-weighted over the saturated time before `until` (None: the
    fleet was never saturated)."""
    times = series.times
    if times.size == 0:
        return None
    spans = np.diff(np.append(np.minimum(times, until), until)).clip(min=0)
    used = series.usage[:, :, 0].sum(axis=1)
    saturated = (used + series.waiting_gpus.sum(axis=1) > capacity.gpus) & (spans > 0)
    if not saturated.any():
        return None
    return float(((capacity.gpus - used[saturated]) * spans[saturated]).sum() / spans[saturated].sum())


@dataclass(frozen=True, slots=True)
class GangUse:
    """A quota-managed gang: its team, arrival, GPUs, and when its last pod was bound (None: never)."""

    team: str
    arrival: float
    gpus: int
    placed_at: float | None


def reclaim_waits(
    series: TeamSeries, gangs: Sequence[GangUse], nominal_gpus: Mapping[str, int]
) -> tuple[list[float], int]:
    """The waits, arrival to placement, of the gangs that arrived while their team's GPUs in use plus theirs
    stayed within its nominal quota and another team used more than its own (borrowed), and how many such
    gangs were never placed."""
    index = {team.name: i for i, team in enumerate(series.teams)}
    nominal = np.array([nominal_gpus[team.name] for team in series.teams], dtype=np.float64)
    waits: list[float] = []
    never = 0
    for gang in gangs:
        at = series.at(gang.arrival)
        used = series.usage[at, :, 0] if at >= 0 else np.zeros(len(series.teams))
        team = index[gang.team]
        others_borrow = bool(np.any(np.delete(used - nominal, team) > 0))
        if not others_borrow or used[team] + gang.gpus > nominal[team]:
            continue
        if gang.placed_at is None:
            never += 1
        else:
            waits.append(gang.placed_at - gang.arrival)
    return waits, never
