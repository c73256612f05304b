"""Revisions: every committed object change is ordered, a reader never skips one, deletions leave tombstones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from libs.db.repositories import revisions as revisions_module
from libs.db.repositories.revisions import RevisionsUnsettled
from libs.db.uow import SqlAlchemyUnitOfWork
from tests.integration.db.builders import make_draft

UowFactory = Callable[[], SqlAlchemyUnitOfWork]
POSTGRES_ONLY = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


async def _changes(uow_factory: UowFactory, after: int, **kwargs: object) -> list[tuple[bool, str, int]]:
    async with uow_factory() as uow:
        found = await uow.revisions.changes_after(after, **kwargs)  # type: ignore[arg-type]
    return [(c.deleted, c.object.name, c.object.revision or 0) for c in found.changes]


async def test_each_commit_that_writes_objects_takes_the_next_revision(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        start, _ = await uow.revisions.current()
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft("a"))
        await uow.objects.upsert(make_draft("b"))
        await uow.commit()
    async with uow_factory() as uow:
        await uow.objects.update_status("PodGroup", "ml", "a", {"phase": "Running"})
        await uow.commit()
    async with uow_factory() as uow:
        await uow.leases.acquire_or_renew("x", "me", datetime.now(UTC), timedelta(seconds=5))
        await uow.commit()

    assert await _changes(uow_factory, start) == [(False, "b", start + 1), (False, "a", start + 2)]
    async with uow_factory() as uow:
        assert (await uow.revisions.current())[0] == start + 2, "a commit writing no object takes none"
        assert (await uow.objects.get("PodGroup", "ml", "a")).revision == start + 2  # type: ignore[union-attr]


async def test_a_deleted_object_is_a_tombstone_at_its_revision(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft("gone", labels={"team": "a"}))
        await uow.commit()
        start, _ = await uow.revisions.current()
    async with uow_factory() as uow:
        await uow.objects.delete("PodGroup", "ml", "gone")
        await uow.commit()

    changes = await _changes(uow_factory, start)
    assert changes == [(True, "gone", start + 1)]
    async with uow_factory() as uow:
        found = await uow.revisions.changes_after(start)
    assert found.changes[0].object.metadata["labels"] == {"team": "a"}


async def test_a_rolled_back_write_takes_no_revision(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        start, _ = await uow.revisions.current()
        await uow.objects.upsert(make_draft("never"))
        await uow.rollback()
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft("kept"))
        await uow.commit()
    async with uow_factory() as uow:
        kept = await uow.objects.get("PodGroup", "ml", "kept")
        assert kept is not None
        assert kept.revision is not None
    # PostgreSQL's sequence may leave the rolled-back revision unused; nothing shows it.
    assert await _changes(uow_factory, start) == [(False, "kept", kept.revision)]
    assert kept.revision in (start + 1, start + 2)


async def test_a_large_revision_is_read_in_pages_that_resume_inside_it(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        start, _ = await uow.revisions.current()
        for name in ("a", "b", "c", "d", "e"):
            await uow.objects.upsert(make_draft(name))
        await uow.commit()
    async with uow_factory() as uow:
        await uow.objects.delete("PodGroup", "ml", "b")
        await uow.objects.upsert(make_draft("f"))
        await uow.commit()

    seen: list[tuple[bool, str, int]] = []
    cursor: tuple[int, str | None] = (start, None)
    pages = 0
    async with uow_factory() as uow:
        while True:
            page = await uow.revisions.changes_after(cursor[0], after_uid=cursor[1], limit=2)
            pages += 1
            seen += [(c.deleted, c.object.name, c.object.revision or 0) for c in page.changes]
            if page.partial_uid is None and not page.changes:
                break
            cursor = (page.revision, page.partial_uid)
            assert pages < 10
    # b's creation is not shown: the object is read as it is now, and it is gone (its tombstone comes later).
    assert sorted(name for deleted, name, rev in seen if rev == start + 1) == ["a", "c", "d", "e"]
    assert sorted((deleted, name) for deleted, name, rev in seen if rev == start + 2) == [
        (False, "f"),
        (True, "b"),
    ]
    assert len(seen) == 6, "no change twice, none skipped"


async def test_compaction_forgets_tombstones_and_moves_the_oldest_resumable_revision(
    uow_factory: UowFactory,
) -> None:
    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft("old"))
        await uow.commit()
    async with uow_factory() as uow:
        await uow.objects.delete("PodGroup", "ml", "old")
        await uow.commit()
        current, _ = await uow.revisions.current()
    async with uow_factory() as uow:
        assert await uow.revisions.compact(current) == 1
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.revisions.current() == (current, current)


async def test_concurrent_writers_commit_in_revision_order(uow_factory: UowFactory) -> None:
    """A reader polling while writers commit sees every revision once and never one out of order."""
    async with uow_factory() as uow:
        start, _ = await uow.revisions.current()

    async def write(index: int) -> None:
        async with uow_factory() as uow:
            await uow.objects.upsert(make_draft(f"w-{index}"))
            await uow.commit()

    seen: list[int] = []
    cursor = start

    async def poll() -> None:
        nonlocal cursor
        async with uow_factory() as uow:
            found = await uow.revisions.changes_after(cursor)
        seen.extend(c.object.revision or 0 for c in found.changes)
        cursor = found.revision

    writers = [asyncio.create_task(write(i)) for i in range(20)]
    while not all(w.done() for w in writers):
        await poll()
        await asyncio.sleep(0)
    await asyncio.gather(*writers)
    await poll()
    assert seen == list(range(start + 1, start + 21))


async def test_retention_compacts_tombstones_past_their_horizon(uow_factory: UowFactory) -> None:
    from libs.core.retention import Horizons
    from libs.db.retention import prune

    async with uow_factory() as uow:
        await uow.objects.upsert(make_draft("short-lived"))
        await uow.commit()
    async with uow_factory() as uow:
        await uow.objects.delete("PodGroup", "ml", "short-lived")
        await uow.commit()
        current, _ = await uow.revisions.current()
    now = datetime.now(UTC)
    keep = Horizons(
        events=now - timedelta(days=1), outbox=now, inbox=now, tombstones=now - timedelta(hours=1)
    )
    async with uow_factory() as uow:
        assert (await prune(uow, keep)).tombstones == 0
    later = Horizons(
        events=now - timedelta(days=1), outbox=now, inbox=now, tombstones=now + timedelta(seconds=5)
    )
    async with uow_factory() as uow:
        assert (await prune(uow, later)).tombstones == 1
    async with uow_factory() as uow:
        assert (await uow.revisions.current())[1] == current


@POSTGRES_ONLY
async def test_a_reader_waits_for_a_transaction_that_took_an_earlier_revision_and_has_not_committed(
    uow_factory: UowFactory,
) -> None:
    """On PostgreSQL revisions are taken as objects are written, not at commit: a later revision may commit
    first. A reader must not settle past the earlier one while it may still commit."""
    async with uow_factory() as uow:
        start, _ = await uow.revisions.current()
    async with uow_factory() as slow:
        await slow.objects.upsert(make_draft("slow"))
        async with uow_factory() as fast:
            await fast.objects.upsert(make_draft("fast"))
            await fast.commit()

        async def read() -> list[tuple[bool, str, int]]:
            return await _changes(uow_factory, start)

        reader = asyncio.create_task(read())
        await asyncio.sleep(0.2)
        assert not reader.done(), "the reader settled while an earlier revision could still commit"
        await slow.commit()
    assert await reader == [(False, "slow", start + 1), (False, "fast", start + 2)]


@POSTGRES_ONLY
async def test_a_reader_gives_up_on_a_writer_that_stays_open(
    uow_factory: UowFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(revisions_module, "SETTLE_TIMEOUT_S", 0.0)
    async with uow_factory() as open_writer:
        await open_writer.objects.upsert(make_draft("open"))
        async with uow_factory() as reader:
            with pytest.raises(RevisionsUnsettled, match="kept writing"):
                await reader.revisions.current()
        await open_writer.rollback()
