"""PostgreSQL-only fixtures of the database tests (the dialect-parametrised ones are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from libs.db.engine import create_engine, create_session_factory
from libs.db.uow import SqlAlchemyUnitOfWork, unit_of_work_factory
from tests.conftest import FakeClock, _throwaway_postgres_database

UowFactory = Callable[[], SqlAlchemyUnitOfWork]


@pytest.fixture
def postgres_database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated database of its own on the test PostgreSQL server."""
    with _throwaway_postgres_database(request, request.getfixturevalue("migrated_postgres_template")) as url:
        yield url


@pytest.fixture
async def pg_uow_factory(postgres_database_url: str, fake_clock: FakeClock) -> AsyncIterator[UowFactory]:
    engine = create_engine(postgres_database_url)
    yield unit_of_work_factory(create_session_factory(engine), clock=fake_clock)
    await engine.dispose()
