"""On PostgreSQL, creates, replacements at the versions read and their events are written by one statement that
commits on its own, all of it or (on a conflict) none of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

import pytest
from sqlalchemy import event

from libs.db.engine import create_engine, create_session_factory
from libs.db.errors import ConflictError
from libs.db.records import OutboxMessage
from libs.db.uow import SqlAlchemyStatements, statements_factory, unit_of_work_factory
from tests.conftest import FakeClock
from tests.integration.db.builders import make_draft, make_envelope
from tests.integration.db.conftest import UowFactory

pytestmark = pytest.mark.postgres
StatementsFactory = Callable[[], SqlAlchemyStatements]


@pytest.fixture
async def stack(
    postgres_database_url: str, fake_clock: FakeClock
) -> AsyncIterator[tuple[UowFactory, StatementsFactory, list[OutboxMessage]]]:
    engine = create_engine(postgres_database_url)
    kicked: list[OutboxMessage] = []

    def after_commit(committed: Sequence[OutboxMessage]) -> None:
        kicked.extend(committed)

    yield (
        unit_of_work_factory(create_session_factory(engine), clock=fake_clock),
        statements_factory(engine, clock=fake_clock, after_commit=after_commit),
        kicked,
    )
    await engine.dispose()


async def test_creates_replacements_and_events_commit_in_one_statement(
    stack: tuple[UowFactory, StatementsFactory, list[OutboxMessage]],
) -> None:
    uow_factory, statements, kicked = stack
    async with uow_factory() as uow:
        [old] = await uow.objects.create_many([make_draft("old", spec={"minCount": 1})])
        await uow.commit()
    events = [make_envelope(correlation_id="one"), make_envelope(correlation_id="two")]

    async with statements() as writing:
        written = await writing.write_at_once(
            [make_draft("new")], [(make_draft("old", spec={"minCount": 2}), old.resource_version)], events
        )
        # Committed already, before the unit of work ends: another connection sees all of it.
        async with uow_factory() as other:
            found = {o.name: o for o in await other.objects.find("PodGroup")}
            logged = await other.events.since(0)

    new, replaced = found["new"], found["old"]
    assert written.created == [new]
    assert written.replaced == [replaced]
    assert (replaced.spec, replaced.generation, replaced.resource_version) == ({"minCount": 2}, 2, 2)
    assert new.revision == replaced.revision
    assert new.revision is not None
    assert new.revision > (old.revision or 0)
    assert [e.envelope.correlation_id for e in logged] == ["one", "two"]
    assert [m.event_id for m in written.committed] == [e.event_id for e in events]
    assert [m.seq for m in written.committed] == [e.seq for e in logged]
    assert kicked == written.committed  # the relay is told at once


async def test_a_stale_replacement_writes_nothing(
    stack: tuple[UowFactory, StatementsFactory, list[OutboxMessage]],
) -> None:
    uow_factory, statements, kicked = stack
    async with uow_factory() as uow:
        [a, b] = await uow.objects.create_many([make_draft("a"), make_draft("b")])
        await uow.commit()
    async with uow_factory() as uow:
        await uow.objects.replace_many_at([(make_draft("b", spec={"minCount": 7}), b.resource_version)])
        await uow.commit()

    async with statements() as writing:
        with pytest.raises(ConflictError, match="not at the version read"):
            await writing.write_at_once(
                [make_draft("c")],
                [
                    (make_draft("a", spec={"minCount": 3}), a.resource_version),
                    (make_draft("b", spec={"minCount": 3}), b.resource_version),  # moved on since
                ],
                [make_envelope(correlation_id="lost")],
            )

    async with uow_factory() as uow:
        stored = {o.name: o for o in await uow.objects.find("PodGroup")}
        logged = await uow.events.since(0)
        queued = await uow.outbox.unpublished(100)
    assert sorted(stored) == ["a", "b"]
    assert stored["a"].spec == a.spec
    assert stored["a"].resource_version == a.resource_version
    assert stored["b"].spec == {"minCount": 7}
    assert logged == []
    assert queued == []
    assert kicked == []


async def test_a_create_of_an_object_that_exists_writes_nothing(
    stack: tuple[UowFactory, StatementsFactory, list[OutboxMessage]],
) -> None:
    uow_factory, statements, _ = stack
    async with uow_factory() as uow:
        [a] = await uow.objects.create_many([make_draft("a")])
        await uow.commit()

    async with statements() as writing:
        with pytest.raises(ConflictError, match="already exists"):
            await writing.write_at_once(
                [make_draft("b"), make_draft("a")], [], [make_envelope(correlation_id="lost")]
            )

    async with uow_factory() as uow:
        stored = await uow.objects.find("PodGroup")
        logged = await uow.events.since(0)
    assert stored == [a]
    assert logged == []


async def test_statements_refuse_what_would_commit_piecemeal(
    stack: tuple[UowFactory, StatementsFactory, list[OutboxMessage]],
) -> None:
    _, statements, _ = stack
    async with statements() as writing:
        with pytest.raises(RuntimeError, match="write_at_once"):
            writing.emit(make_envelope())
        with pytest.raises(RuntimeError):
            await writing.commit()


async def test_nothing_to_write_sends_no_statement(postgres_database_url: str, fake_clock: FakeClock) -> None:
    engine = create_engine(postgres_database_url)
    sent: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    statements = statements_factory(engine, clock=fake_clock)
    try:
        async with statements() as writing:
            written = await writing.write_at_once([], [], [])
            await writing.write_at_once([make_draft("a")], [], [])
    finally:
        await engine.dispose()
    assert written == ([], [], [])
    assert len(sent) == 1  # the second call's statement only
