"""Errors the persistence layer raises; callers map them to API responses or retries."""

from __future__ import annotations


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
