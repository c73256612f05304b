"""Experiments run by the whole router fleet: one record per experiment in the bus's key-value bucket (on file)
holds every process's feedback tally and, once the test concludes, the winner.

Each pass (every `interval_s`, at once when a process concludes) reads each experiment's record, adds the
peers' tallies to this process's test, adopts a stored winner, and writes this process's tally when it moved
(one compare-and-set, which also stores a conclusion unless one is stored already). So the test counts every
score the fleet was given; the first conclusion stored is the fleet's and the only one audited; and a restarted
process resumes its tally and finds the winner. A pass that cannot reach the bus leaves everything as it is (a
process that concluded routes to its winner meanwhile) and the next pass tries again.
"""

from __future__ import annotations

import asyncio
import logging

from libs.core.routing import ExperimentConclusion, ExperimentRecord, FeatureExperiment, Tally
from libs.router import Router
from services.llm_router.ledger import LedgerRecords

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 1.0
RECORD_PREFIX = "experiment."


class SharedExperiments:
    """`await sync()` for one pass (start-up, tests), `run()` as a task, `await sync()` again at stop."""

    def __init__(
        self, router: Router, records: LedgerRecords, instance: str, *, interval_s: float = DEFAULT_INTERVAL_S
    ) -> None:
        self._router = router
        self._records = records
        self._instance = instance
        self.interval_s = interval_s
        self._resumed: set[str] = set()
        self._pending: dict[str, ExperimentConclusion] = {}
        self._stored: set[str] = set()
        """Experiments whose conclusion this process's last write stored (no winner was stored before)."""
        self._wake = asyncio.Event()
        self._one_pass = asyncio.Lock()
        router.on_conclusion = self._concluded
        self.audited = 0

    def _concluded(self, conclusion: ExperimentConclusion) -> None:
        self._pending[conclusion.key] = conclusion
        self._wake.set()

    async def run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.interval_s):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.sync()
            except Exception as exc:  # the bus is away: the next pass tries again
                log.warning("experiments not shared: %r", exc)

    async def sync(self) -> None:
        async with self._one_pass:
            for experiment in self._router.experiments():
                await self._sync_one(experiment)

    async def _sync_one(self, experiment: FeatureExperiment) -> None:
        key = RECORD_PREFIX + experiment.key
        if experiment.key not in self._resumed:
            stored = _parsed(await self._records.read(key), key)
            own = stored.tallies.get(self._instance) if stored is not None else None
            if own is not None:
                self._router.resume_tally(experiment.key, own)
                experiment.changed = True
            self._resumed.add(experiment.key)
        pending = self._pending.get(experiment.key)
        data: bytes | None
        if experiment.changed or pending is not None:
            experiment.changed = False
            tally = experiment.own_tally()
            try:
                data = await self._records.change(
                    key, lambda current: self._next(current, key, experiment, tally)
                )
            except BaseException:
                experiment.changed = True
                raise
        else:
            data = await self._records.read(key)
        record = _parsed(data, key)
        if record is not None:
            self._apply(experiment, record, pending)

    def _next(self, current: bytes | None, key: str, experiment: FeatureExperiment, tally: Tally) -> bytes:
        record = _parsed(current, key) or ExperimentRecord(experiment.name, {})
        record = record.with_tally(self._instance, tally)
        pending = self._pending.get(experiment.key)
        self._stored.discard(experiment.key)
        if pending is not None:
            if record.winner is None:
                self._stored.add(experiment.key)
            record = record.concluded(pending.winner, self._instance)
        return record.to_json()

    def _apply(
        self, experiment: FeatureExperiment, record: ExperimentRecord, pending: ExperimentConclusion | None
    ) -> None:
        for instance, tally in record.tallies.items():
            if instance != self._instance:
                self._router.record_peer_tally(experiment.key, instance, tally)
        if record.winner is None:
            return
        self._router.adopt_conclusion(experiment.key, record.winner)
        if pending is not None:
            del self._pending[experiment.key]
            # Audited by the write that stored it: a process restarted under the same instance name that
            # concludes again finds its own earlier conclusion stored, and does not audit it twice.
            if experiment.key in self._stored and record.winner == pending.winner:
                self._stored.discard(experiment.key)
                self._router.audit_conclusion(pending)
                self.audited += 1


def _parsed(data: bytes | None, key: str) -> ExperimentRecord | None:
    if data is None:
        return None
    try:
        return ExperimentRecord.from_json(data)
    except ValueError as exc:
        log.warning("experiment record %s unreadable, written anew: %s", key, exc)
        return None
