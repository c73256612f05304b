"""Admission fair sharing: within a ClusterQueue whose `admissionScope.admissionMode` is
`UsageBasedAdmissionFairSharing`, the workloads of the LocalQueue that used the least lately go first (Kueue's
`AdmissionFairSharing`, KEP 4136; `pkg/util/admissionfairsharing`).

Each LocalQueue's consumed resources are an exponentially decayed average of what its admitted workloads
hold, sampled every `sampling_interval_s`: after `elapsed` seconds, consumed = consumed * (1 - a) + usage * a
with a = 1 - 0.5^(elapsed / half_life_s). A workload admitted between samples adds an entry penalty of its
requests * a(sampling interval), so that the next decision already counts it; a sample settles the penalties
(the usage it takes includes them). A LocalQueue's usage is the sum over resources of consumed plus penalty,
each in Kueue's units (cores, bytes, devices) times its resource weight (1 unless configured), divided by the
LocalQueue's `fairSharing.weight` (0: always last). Lower goes first; equal usage falls back to the queue's
own order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from libs.api.quantity import CPU, canonical_amount, format_amount

DEFAULT_SAMPLING_INTERVAL_S: Final = 300.0
"""Kueue's default `usageSamplingInterval` (5 minutes)."""


@dataclass(frozen=True)
class AdmissionFairSharing:
    """Kueue's `admissionFairSharing` configuration: the half-life of past usage, how often usage is
    sampled, and the weight of each resource in a LocalQueue's usage (1 when not given)."""

    half_life_s: float
    sampling_interval_s: float = DEFAULT_SAMPLING_INTERVAL_S
    resource_weights: Mapping[str, float] = field(default_factory=dict)


def decay_rate(elapsed_s: float, half_life_s: float) -> float:
    """a: the weight of the latest usage after `elapsed_s` (a half-life of 0 forgets the past at once)."""
    if half_life_s <= 0:
        return 1.0
    return 1.0 - math.pow(0.5, max(elapsed_s, 0.0) / half_life_s)


@dataclass
class LocalQueueUsage:
    """One LocalQueue's decayed consumed resources (canonical units, as floats), the penalties of the
    workloads admitted since the last sample, and when it was last sampled."""

    consumed: dict[str, float] = field(default_factory=dict)
    penalty: dict[str, float] = field(default_factory=dict)
    last_update: float = 0.0


class UsageLedger:
    """Every LocalQueue's usage, kept by the scheduler on its clock. Deterministic: what it holds depends
    only on the samples, admissions and restores it was given, and their times."""

    def __init__(self, config: AdmissionFairSharing) -> None:
        self.config = config
        self.entries: dict[str, LocalQueueUsage] = {}
        """By LocalQueue key, `namespace/name`."""
        self.last_sample: float | None = None

    def due(self, now: float) -> bool:
        return self.last_sample is None or now - self.last_sample >= self.config.sampling_interval_s

    def sample(self, now: float, usage: Mapping[str, Mapping[str, int]]) -> list[str]:
        """Decay each LocalQueue's consumed resources towards what it holds now (`usage`, by LocalQueue key,
        canonical amounts) and settle its penalties; the keys whose figures changed, sorted."""
        previous, self.last_sample = self.last_sample, now
        changed = []
        for key in sorted(set(self.entries) | set(usage)):
            # A LocalQueue first seen now held what it holds since the last sample (at most).
            entry = self.entries.setdefault(
                key, LocalQueueUsage(last_update=now if previous is None else previous)
            )
            alpha = decay_rate(now - entry.last_update, self.config.half_life_s)
            held = usage.get(key, {})
            consumed = {
                resource: entry.consumed.get(resource, 0.0) * (1 - alpha) + held.get(resource, 0) * alpha
                for resource in sorted(set(entry.consumed) | set(held))
            }
            consumed = {resource: amount for resource, amount in consumed.items() if amount >= 1e-9}
            if consumed != entry.consumed or entry.penalty:
                changed.append(key)
            entry.consumed, entry.penalty, entry.last_update = consumed, {}, now
        return changed

    def admitted(self, key: str, requests: Mapping[str, int]) -> None:
        """A workload of LocalQueue `key` reserved `requests`: its entry penalty, until the next sample."""
        alpha = decay_rate(self.config.sampling_interval_s, self.config.half_life_s)
        entry = self.entries.setdefault(key, LocalQueueUsage(last_update=self.last_sample or 0.0))
        for resource, amount in requests.items():
            entry.penalty[resource] = entry.penalty.get(resource, 0.0) + amount * alpha

    def restore(self, key: str, consumed: Mapping[str, float], last_update: float) -> None:
        """What a LocalQueue's status says it consumed (written by an earlier scheduler), unless this ledger
        already counts it."""
        if key not in self.entries:
            self.entries[key] = LocalQueueUsage(dict(consumed), {}, last_update)

    def forget(self, key: str) -> None:
        self.entries.pop(key, None)

    def usage(self, key: str, weight: Decimal) -> float:
        """The LocalQueue's weighted usage: what its workloads are ordered by (see the module)."""
        entry = self.entries.get(key)
        if weight <= 0:
            return math.inf
        if entry is None:
            return 0.0
        total = 0.0
        for resource in sorted(set(entry.consumed) | set(entry.penalty)):
            amount = entry.consumed.get(resource, 0.0) + entry.penalty.get(resource, 0.0)
            total += self.config.resource_weights.get(resource, 1.0) * kueue_units(resource, amount)
        return total / float(weight)

    def status(self, key: str) -> dict[str, Any] | None:
        """Kueue's `admissionFairSharingStatus` of the LocalQueue: `consumedResources` and `lastUpdate` (the
        scheduler's clock counts seconds since the epoch)."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        consumed = {
            resource: format_amount(resource, round(amount))
            for resource, amount in sorted(entry.consumed.items())
        }
        last_update = datetime.fromtimestamp(entry.last_update, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"consumedResources": consumed, "lastUpdate": last_update}


def kueue_units(resource: str, amount: float) -> float:
    """A canonical amount as Kueue's `AsApproximateFloat64` counts it: cores for cpu, the unit otherwise."""
    return amount / 1000.0 if resource == CPU else amount


def parse_status(status: Mapping[str, Any]) -> tuple[dict[str, float], float]:
    """The consumed resources (canonical units) and last update (seconds since the epoch) of a stored
    `admissionFairSharingStatus`; raises ValueError on what it cannot read."""
    found = status.get("consumedResources", {})
    if not isinstance(found, Mapping):
        raise ValueError("consumedResources: not a resource list")
    consumed = {
        str(resource): float(canonical_amount(str(resource), str(q))) for resource, q in found.items()
    }
    written = status.get("lastUpdate")
    if not isinstance(written, str):
        raise ValueError("lastUpdate: not a time")
    return consumed, datetime.fromisoformat(written.replace("Z", "+00:00")).timestamp()


def summed(usages: Iterable[Mapping[tuple[str, str], int]]) -> dict[str, int]:
    """Usage per (flavor, resource) of several workloads, summed per resource."""
    total: dict[str, int] = {}
    for usage in usages:
        for (_, resource), amount in usage.items():
            total[resource] = total.get(resource, 0) + amount
    return total
