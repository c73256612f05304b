"""Shared fixtures: a real nats-server per test, and database URLs for SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from libs.runtime.nats_server import EmbeddedNatsServer

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
