"""Retention: how long the database keeps each row family, and so what a pruning pass may delete.

The audit log is the record users read (`podway events`, `podway check`): kept for its own horizon, 30 days
by default. The outbox and the inbox are plumbing: a published outbox row is needed only while the relay
could publish it again into JetStream's duplicate window, and a consumer's inbox mark only while the event
could still be delivered to it again (its redelivery window). Neither is ever kept shorter than its window,
whatever the settings say: a shorter horizon would let an event be published twice or applied twice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

DEFAULT_EVENTS = timedelta(days=30)
DEFAULT_TOMBSTONES = timedelta(hours=1)
"""How long a deleted object is remembered for watches: a watch resuming from an older resourceVersion is
answered 410 Expired (kube-apiserver's etcd keeps about five minutes)."""
WINDOW_MARGIN = 2
"""Plumbing rows are kept twice their window by default, for replicas whose clocks differ a little."""


@dataclass(frozen=True, slots=True)
class Horizons:
    """Rows older than these go: events that occurred, outbox rows published, inbox marks processed before."""

    events: datetime
    outbox: datetime
    inbox: datetime
    tombstones: datetime | None = None


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long each row family is kept."""

    events: timedelta
    outbox: timedelta
    inbox: timedelta
    tombstones: timedelta = DEFAULT_TOMBSTONES

    def horizons(self, now: datetime) -> Horizons:
        """What is past the horizon at `now`."""
        return Horizons(
            events=now - self.events,
            outbox=now - self.outbox,
            inbox=now - self.inbox,
            tombstones=now - self.tombstones,
        )


def retention_policy(
    *,
    duplicate_window: timedelta,
    redelivery_window: timedelta,
    events: timedelta | None = None,
    outbox: timedelta | None = None,
    inbox: timedelta | None = None,
) -> RetentionPolicy:
    """The policy asked for (defaults where nothing is asked: 30 days of audit, twice each window of
    plumbing), with the outbox kept at least the duplicate window and the inbox at least the redelivery
    window."""
    return RetentionPolicy(
        events=events if events is not None else DEFAULT_EVENTS,
        outbox=max(outbox if outbox is not None else WINDOW_MARGIN * duplicate_window, duplicate_window),
        inbox=max(inbox if inbox is not None else WINDOW_MARGIN * redelivery_window, redelivery_window),
    )
