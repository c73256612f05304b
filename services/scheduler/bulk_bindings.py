"""Binding every pod of a pass in one statement.

Stopgap adapter: `BindingRepository` binds one pod per statement, and at a thousand pods a second those
round trips are most of a pass's transaction, which lease renewals wait for. This belongs in libs.db as
`BindingRepository.bind_many`; it is used as soon as the repository has it. Until then the same table is
written through the unit of work's session with the repository's own helpers, so the database keeps the
same guarantees: the primary key refuses a second binding, the fence trigger refuses a stale epoch (it
runs for each row of a multi-row insert).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from libs.db.errors import AlreadyBoundError, StaleEpochError
from libs.db.ports import UnitOfWork
from libs.db.records import Fence, PodBinding
from libs.db.repositories._sql import STALE_EPOCH_MESSAGE, insert_ignoring_duplicates
from libs.db.schema import pod_bindings


async def bind_all(uow: UnitOfWork, bindings: Sequence[PodBinding], *, fence: Fence) -> None:
    """Bind every pod under the fence; AlreadyBoundError or StaleEpochError as `BindingRepository.bind`."""
    if not bindings:
        return
    bind_many = getattr(uow.bindings, "bind_many", None)
    if bind_many is not None:
        await bind_many(bindings, fence=fence)
        return
    session = getattr(uow, "session", None)
    if session is None:
        for binding in bindings:
            await uow.bindings.bind(binding, fence=fence)
        return
    # One statement compiled once and sent as an executemany; RETURNING says which rows went in.
    statement = insert_ignoring_duplicates(session, pod_bindings, {}).returning(pod_bindings.c.pod_uid)
    rows = [_row(binding, fence) for binding in bindings]
    try:
        inserted = len((await session.execute(statement, rows)).all())
    except Exception as exc:
        if STALE_EPOCH_MESSAGE in str(getattr(exc, "orig", exc)):
            raise StaleEpochError(f"binding {len(rows)} pods: {fence} is stale") from exc
        raise
    if inserted != len(rows):
        raise AlreadyBoundError(f"{len(rows) - inserted} of {len(rows)} pods are already bound")


def _row(binding: PodBinding, fence: Fence) -> dict[str, Any]:
    return {
        "pod_uid": binding.pod_uid,
        "node_name": binding.node_name,
        "podgroup_uid": binding.podgroup_uid,
        "lease_name": fence.lease,
        "epoch": fence.epoch,
        "bound_at": binding.bound_at,
    }
