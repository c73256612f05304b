"""Retention as the stack runs it: admission prunes on a schedule, whichever replica holds the `retention`
lease, with the policy the settings give (libs/core/retention.py) and the bus's windows as floors."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from libs.core.retention import RetentionPolicy, retention_policy
from libs.db.ports import UnitOfWorkFactory
from libs.db.records import RetentionReport
from libs.db.retention import prune_if_leader
from libs.messaging.consumer import redelivery_window_s
from libs.messaging.streams import DUPLICATE_WINDOW_S
from libs.runtime.clock import Clock, utc_now
from libs.runtime.settings import PodwaySettings

log = logging.getLogger(__name__)

LEASE_INTERVALS = 3
"""The lease outlives this many intervals: its holder keeps it by pruning, a successor waits that long."""


def policy_from(settings: PodwaySettings) -> RetentionPolicy:
    """The settings' policy (`PODWAY_RETENTION_*`), the plumbing kept at least as long as the bus needs."""
    return retention_policy(
        duplicate_window=timedelta(seconds=DUPLICATE_WINDOW_S),
        redelivery_window=timedelta(seconds=redelivery_window_s()),
        events=timedelta(days=settings.retention_events_days),
        outbox=_seconds(settings.retention_outbox_seconds),
        inbox=_seconds(settings.retention_inbox_seconds),
    )


def _seconds(value: float | None) -> timedelta | None:
    return timedelta(seconds=value) if value is not None else None


class RetentionSchedule:
    """Every `interval_s`, prune what is past the policy's horizons if this replica holds the lease."""

    def __init__(
        self,
        uow_factory: UnitOfWorkFactory,
        policy: RetentionPolicy,
        *,
        holder: str,
        interval_s: float,
        clock: Clock = utc_now,
    ) -> None:
        self.uow = uow_factory
        self.policy = policy
        self.holder = holder
        self.interval_s = interval_s
        self.clock = clock

    async def run_once(self) -> RetentionReport | None:
        """One pass; None when another replica holds the lease."""
        now = self.clock()
        lease = timedelta(seconds=LEASE_INTERVALS * self.interval_s)
        async with self.uow() as uow:
            report = await prune_if_leader(
                uow, self.policy.horizons(now), holder=self.holder, now=now, lease=lease
            )
        if report is not None and report.total:
            log.info(
                "retention pruned",
                extra={
                    "events": report.events,
                    "outbox": report.outbox,
                    "inbox": report.inbox,
                    "tombstones": report.tombstones,
                },
            )
        return report

    async def run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("retention pass failed; trying again at the next interval")
            await asyncio.sleep(self.interval_s)
