"""Database URLs: libpq's multi-host form is read as the asyncpg dialect's list of hosts."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u@h:5433/db", "postgresql+asyncpg://u@h:5433/db"),
        ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+asyncpg://u@h/db"),
        ("postgresql+psycopg2://u@a:1,b:2/db", "postgresql+asyncpg://u@/db?host=a%3A1&host=b%3A2"),
        ("sqlite:///state.db", "sqlite+aiosqlite:///state.db"),
        ("sqlite+aiosqlite:///state.db", "sqlite+aiosqlite:///state.db"),
    ],
)
def test_a_url_naming_another_driver_is_read_with_the_one_podway_ships(given: str, expected: str) -> None:
    assert parse_database_url(given).render_as_string(hide_password=False) == expected


def test_a_database_podway_does_not_store_in_is_refused_saying_which_it_does() -> None:
    with pytest.raises(ValueError, match=r"'mysql://u:\*\*\*@h/db': Podway stores its state in PostgreSQL"):
        parse_database_url("mysql://u:secret@h/db")
