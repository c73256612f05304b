"""On PostgreSQL, creates, replacements at the versions read and their events are written by one statement that
commits on its own, all of it or (on a conflict) none of it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import asyncpg
import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from libs.db.direct import DirectConnections
from libs.db.engine import create_engine, create_session_factory
from libs.db.errors import ConflictError
from libs.db.records import Condition, OutboxMessage
from libs.db.uow import SqlAlchemyStatements, statements_factory, unit_of_work_factory
from tests.conftest import FakeClock
from tests.integration.db.builders import make_draft, make_envelope
from tests.integration.db.conftest import UowFactory

pytestmark = pytest.mark.postgres
StatementsFactory = Callable[[], SqlAlchemyStatements]


@pytest.fixture(params=["session", "direct"])
async def stack(
    request: pytest.FixtureRequest, postgres_database_url: str, fake_clock: FakeClock
) -> AsyncIterator[tuple[UowFactory, StatementsFactory, list[OutboxMessage]]]:
    """Statements through the session, or on direct connections (libs.db.direct): the same outcomes."""
    engine = create_engine(postgres_database_url)
    direct = DirectConnections(engine, size=2) if request.param == "direct" else None
    kicked: list[OutboxMessage] = []

    def after_commit(committed: Sequence[OutboxMessage]) -> None:
        kicked.extend(committed)

    yield (
        unit_of_work_factory(create_session_factory(engine), clock=fake_clock),
        statements_factory(engine, clock=fake_clock, after_commit=after_commit, direct=direct),
        kicked,
    )
    if direct is not None:
        await direct.close()
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


@dataclass
class Direct:
    """Direct connections (one, pinged after a second idle on the `idle` clock) beside the engine's pool."""

    engine: AsyncEngine
    connections: DirectConnections
    statements: StatementsFactory
    uow_factory: UowFactory
    idle: list[float]

    async def terminate(self, pid: int) -> None:
        """End a server process, as a failover or a restart of the server would."""
        async with self.uow_factory() as uow:
            await uow.session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})


@pytest.fixture
async def direct(postgres_database_url: str, fake_clock: FakeClock) -> AsyncIterator[Direct]:
    engine = create_engine(postgres_database_url)
    idle = [0.0]
    connections = DirectConnections(engine, size=1, ping_after_idle_s=1.0, clock=lambda: idle[0])
    yield Direct(
        engine,
        connections,
        statements_factory(engine, clock=fake_clock, direct=connections),
        unit_of_work_factory(create_session_factory(engine), clock=fake_clock),
        idle,
    )
    await connections.close()
    await engine.dispose()


async def backend_pid(statements: SqlAlchemyStatements) -> int:
    """The server process of the unit's direct connection (its first statement takes one)."""
    session = statements._direct
    assert session is not None
    [row] = await session.fetch(text("SELECT pg_backend_pid() AS pid"), {})
    return int(row.pid)


async def test_a_writes_view_reads_the_same_on_a_direct_connection_as_through_the_session(
    direct: Direct, fake_clock: FakeClock
) -> None:
    async with direct.uow_factory() as uow:
        [pod, _] = await uow.objects.create_many(
            [
                make_draft("p", kind="Pod", spec={"nodeName": ""}),
                make_draft("high", kind="PriorityClass", namespace=""),
            ]
        )
        ready = Condition(pod.uid, "Ready", "True", "node_agent", "Started", "", 1, fake_clock())
        await uow.conditions.set_many([ready])
        await uow.commit()
    keys = [("Pod", "ml", "p"), ("Pod", "ml", "absent"), ("PodGroup", "ml", "g")]
    through_session = statements_factory(direct.engine, clock=fake_clock)
    read = {}
    for way, statements in (("session", through_session), ("direct", direct.statements)):
        async with statements() as reading:
            read[way] = (
                await reading.objects.get_many_with_facts(keys, every_of="PriorityClass"),
                await reading.objects.get_many(keys),
                await reading.objects.find_awaiting_workloads([("ml", "train")]),
            )

    assert read["direct"] == read["session"]
    with_facts = {r.stored.name: r for r in read["direct"][0]}
    assert sorted(with_facts) == ["high", "p"]
    assert [c.type for c in with_facts["p"].conditions or []] == ["Ready"]


async def test_a_direct_connection_that_failed_is_replaced_and_one_that_met_a_conflict_is_kept(
    direct: Direct,
) -> None:
    async with direct.statements() as writing:
        await writing.write_at_once([make_draft("a")], [], [])
        first = await backend_pid(writing)
    async with direct.statements() as writing:
        with pytest.raises(ConflictError):
            await writing.write_at_once([make_draft("a")], [], [])
    async with direct.statements() as writing:
        assert await backend_pid(writing) == first  # a conflict left it as it was
    await direct.terminate(first)
    # The statement on the ended connection fails (with one of the driver's errors, as its reader meets
    # the end), unless the connection was seen closed before it was handed out.
    with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError):
        async with direct.statements() as writing:
            await writing.write_at_once([make_draft("b")], [], [])
    async with direct.statements() as writing:
        assert await backend_pid(writing) != first
    async with direct.uow_factory() as uow:
        assert {o.name for o in await uow.objects.find("PodGroup")} <= {"a", "b"}


async def test_a_statement_the_direct_connections_do_not_serve_goes_through_the_session_and_is_given_back(
    direct: Direct,
) -> None:
    async with direct.statements() as reading:
        await reading.write_at_once([make_draft("a")], [], [])
        assert not reading.session.in_transaction()  # the pool was not asked
        assert [o.name for o in await reading.objects.find("PodGroup")] == ["a"]  # not a direct read
        assert reading.session.in_transaction()
    assert direct.engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_a_direct_connection_idle_for_a_while_is_pinged_and_replaced_when_the_server_ended_it(
    direct: Direct,
) -> None:
    """As the engine's pool does: a write after a restart of the server meets a new connection, not an error
    that would leave its outcome unknown."""
    async with direct.statements() as writing:
        first = await backend_pid(writing)
    await direct.terminate(first)
    direct.idle[0] += 1.5

    async with direct.statements() as writing:
        written = await writing.write_at_once([make_draft("a")], [], [])
        second = await backend_pid(writing)

    assert [o.name for o in written.created] == ["a"]
    assert second != first
