"""The `database` entry of a health beat: a real PostgreSQL answers `ok`, a server that is not there
`unreachable` (within the ping's timeout), SQLite is a local file and is not asked."""

from __future__ import annotations

import socket
from pathlib import Path

from libs.db.engine import create_engine
from libs.db.reachability import database_check, database_state


async def test_a_postgresql_that_answers_is_ok(postgres_url: str):
    engine = create_engine(postgres_url)
    try:
        assert await database_check(engine)() == "ok"
    finally:
        await engine.dispose()


async def test_a_postgresql_that_is_not_there_is_unreachable():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    engine = create_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/test")
    try:
        assert await database_state(engine, timeout_s=5) == "unreachable"
    finally:
        await engine.dispose()


async def test_sqlite_is_not_asked(tmp_path: Path):
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'missing-dir' / 'x.db'}")
    try:
        assert await database_state(engine) == "ok"
    finally:
        await engine.dispose()
