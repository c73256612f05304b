"""Shared fixtures: a real nats-server per test, and database URLs for SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import hypothesis
import pytest
import uvloop
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from libs.db import migrate
from libs.db.engine import create_engine, create_session_factory
from libs.db.uow import SqlAlchemyUnitOfWork, unit_of_work_factory
from libs.messaging.broker import provision_streams
from libs.runtime.nats_server import EmbeddedNatsServer

T = TypeVar("T")

# The suite (CI) explores the same cases every run, so a red build always means a change broke something;
# `HYPOTHESIS_PROFILE=explore` draws new cases each run to look for bugs nobody has found yet.
hypothesis.settings.register_profile("suite", derandomize=True)
hypothesis.settings.register_profile("explore", derandomize=False)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], Any]]:
    """asyncio's loop for every test; a module with `ON_BOTH_EVENT_LOOPS = True` runs each test once on it and
    once on uvloop's (the router's)."""
    factories: dict[str, Callable[[], Any]] = {"asyncio": asyncio.new_event_loop}
    if getattr(getattr(item, "module", None), "ON_BOTH_EVENT_LOOPS", False):
        factories["uvloop"] = uvloop.new_event_loop
    return factories


DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[EmbeddedNatsServer]:
    """A fresh nats-server with JetStream on a free port, killed after the test."""
    server = EmbeddedNatsServer(data_dir=tmp_path / "nats").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def nats_url(nats_server: EmbeddedNatsServer) -> str:
    """The fresh server's URL, its streams provisioned as `podway migrate` and `podway up` do before any
    service starts."""
    _run_blocking(provision_streams(nats_server.url))
    return nats_server.url


def postgres_base_url() -> str:
    return os.environ.get("PODWAY_TEST_DATABASE_URL", DEFAULT_PG_URL)


async def _postgres_answers(url: str) -> str | None:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    try:
        conn = await asyncio.wait_for(asyncpg.connect(dsn), timeout=3)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The base PostgreSQL URL, or a visible skip when no server answers."""
    url = postgres_base_url()
    problem = asyncio.run(_postgres_answers(url))
    if problem is not None:
        pytest.skip(f"PostgreSQL not reachable at {url}: {problem}")
    return url


# --- databases: a fresh, migrated database per test, on SQLite and on PostgreSQL ------------------------------


def _run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even while a test's event loop is running."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


async def _admin(url: str, *statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(
        _with_database(url, "postgres").replace("postgresql+asyncpg://", "postgresql://"),
        timeout=15,
        command_timeout=60,
    )
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def migrated_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per session; tests get copies."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    _run_blocking(migrate.upgrade(sqlite_url(path)))
    return path


@pytest.fixture(scope="session")
def migrated_postgres_template(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL database migrated to head once per session; tests get `CREATE DATABASE ... TEMPLATE` copies."""
    name = f"podway_tpl_{os.getpid()}"
    _run_blocking(
        _admin(postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"CREATE DATABASE {name}")
    )
    _run_blocking(migrate.upgrade(_with_database(postgres_url, name)))
    try:
        yield name
    finally:
        _run_blocking(_admin(postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture(scope="session")
def _postgres_dropper() -> Iterator[concurrent.futures.Executor]:
    """Drops throwaway databases in the background (each drop takes ~0.2 s, longer under load); waits for
    them at session end, where a worker's backlog is drained over several connections at once."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        yield pool


@contextlib.contextmanager
def _throwaway_postgres_database(request: pytest.FixtureRequest, template: str | None) -> Iterator[str]:
    postgres_url: str = request.getfixturevalue("postgres_url")
    dropper: concurrent.futures.Executor = request.getfixturevalue("_postgres_dropper")
    name = f"podway_t_{uuid.uuid4().hex[:12]}"
    source = f" TEMPLATE {template}" if template else ""
    _run_blocking(_admin(postgres_url, f"CREATE DATABASE {name}{source}"))
    try:
        yield _with_database(postgres_url, name)
    finally:
        dropper.submit(asyncio.run, _admin(postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

#: For tests whose subject is not the database (messaging logic): one fresh SQLite file, no Postgres copy.
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a fresh database migrated to head: SQLite (a file in tmp_path) and PostgreSQL (a throwaway
    database, skipped visibly when PostgreSQL is down)."""
    if request.param == "sqlite":
        path = tmp_path / "podway.db"
        shutil.copyfile(request.getfixturevalue("migrated_sqlite_template"), path)
        yield sqlite_url(path)
        return
    template = request.getfixturevalue("migrated_postgres_template")
    with _throwaway_postgres_database(request, template) as url:
        yield url


@pytest.fixture(params=DATABASES)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a fresh database with no tables (for migration tests)."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "empty.db")
        return
    with _throwaway_postgres_database(request, None) as url:
        yield url


@pytest.fixture
async def db_session_factory(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on the test's fresh database; the engine is disposed after the test."""
    engine = create_engine(database_url)
    try:
        yield create_session_factory(engine)
    finally:
        await engine.dispose()


class FakeClock:
    """A clock tests move by hand: time never passes on its own."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def uow_factory(
    db_session_factory: async_sessionmaker[AsyncSession], fake_clock: FakeClock
) -> Callable[[], SqlAlchemyUnitOfWork]:
    """Units of work on the test's fresh database, timed by `fake_clock`."""
    return unit_of_work_factory(db_session_factory, clock=fake_clock)
