"""Database URLs: libpq's multi-host form is read as the asyncpg dialect's list of hosts."""

from __future__ import annotations

from libs.db.engine import dialect_name, parse_database_url


def test_a_multi_host_url_lists_every_server_in_order_with_its_port() -> None:
    url = parse_database_url(
        "postgresql+asyncpg://podway:secret@db-a:5433,db-b/podway?target_session_attrs=read-write"
    )

    assert url.query["host"] == ("db-a:5433", "db-b:5432")
    assert url.query["target_session_attrs"] == "read-write"
    assert (url.username, url.password, url.database, url.host) == ("podway", "secret", "podway", None)
    assert dialect_name(url) == "postgresql"


def test_a_single_host_url_and_a_sqlite_path_with_a_comma_are_left_as_they_are() -> None:
    single = parse_database_url("postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    sqlite = parse_database_url("sqlite+aiosqlite:////tmp/a,b/podway.db")

    assert (single.host, single.port, dict(single.query)) == ("127.0.0.1", 5432, {})
    assert sqlite.database == "/tmp/a,b/podway.db"
