"""Errors the persistence layer raises; callers map them to API responses or retries."""

from __future__ import annotations

import sys


class PersistenceError(Exception):
    """Base of every error this package raises on purpose."""


class ConflictError(PersistenceError):
    """An optimistic-concurrency check failed: the row changed (or exists, or vanished) since it was read."""


class NotFoundError(PersistenceError):
    """The row asked for does not exist."""


class StaleEpochError(PersistenceError):
    """A leased writer wrote with an epoch that is no longer the lease's: another replica took over."""


class AlreadyBoundError(PersistenceError):
    """The pod already has a binding; the database refused a second one."""


class ConditionOwnershipError(PersistenceError):
    """A service tried to write a condition type that another service owns."""


def database_unreachable(error: BaseException) -> bool:
    """The database (or the way to it) was away: the connection broke, or none could be made (refused, timed
    out, no listed server writable yet during a failover). The work was not done and can be done again."""
    # Looked up rather than imported: the CLI's clients reach this module without a database, and importing
    # SQLAlchemy costs them 0.45 s; before it is imported, no error of its kind can exist.
    exc = sys.modules.get("sqlalchemy.exc")
    if exc is not None and isinstance(error, exc.DBAPIError):
        return bool(error.connection_invalidated)
    return isinstance(error, OSError)
