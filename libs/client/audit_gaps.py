"""Sync answers without their audit row: the router group-commits its audit events, so a router process that
crashes loses what it buffered since its last commit (at most its flush window, `PODWAY_ROUTER_FLUSH_INTERVAL_S`).
Only the callers know every answer they got; given their request ids (the `X-Request-Id` header, or
`podway.request_id` in the body), this finds the ones the audit log lacks, so the loss is counted, not guessed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from libs.db.engine import create_engine, create_session_factory
from libs.db.uow import unit_of_work_factory
from libs.events.catalogue import EventType


@dataclass(frozen=True)
class AuditGaps:
    """How many answers were checked, and which have no `inference.completed`."""

    answered: int
    missing: list[str] = field(default_factory=list)

    @property
    def audited(self) -> int:
        return self.answered - len(self.missing)


async def audit_gaps(database_url: str, request_ids: Sequence[str]) -> AuditGaps:
    """The answered requests (by id) whose `inference.completed` is not in the audit log."""
    unique = list(dict.fromkeys(request_ids))
    engine = create_engine(database_url)
    try:
        async with unit_of_work_factory(create_session_factory(engine))() as uow:
            audited = await uow.events.correlations_with(EventType.INFERENCE_COMPLETED.value, unique)
    finally:
        await engine.dispose()
    return AuditGaps(answered=len(unique), missing=[rid for rid in unique if rid not in audited])
