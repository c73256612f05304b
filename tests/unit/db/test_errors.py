"""Which failures mean the database was away (retry) rather than the work being wrong."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, IntegrityError

from libs.db.errors import ConflictError, database_unreachable


def test_a_broken_or_refused_connection_is_the_database_being_away() -> None:
    broken = DBAPIError("SELECT 1", None, ConnectionResetError(), connection_invalidated=True)

    assert database_unreachable(broken)
    assert database_unreachable(ConnectionRefusedError(111, "Connect call failed"))
    assert database_unreachable(TimeoutError())


def test_a_refused_statement_or_a_conflict_is_not() -> None:
    refused = IntegrityError("INSERT ...", None, Exception("duplicate key value violates unique constraint"))

    assert not database_unreachable(refused)
    assert not database_unreachable(ConflictError("the row changed"))
    assert not database_unreachable(RuntimeError("a handler bug"))
