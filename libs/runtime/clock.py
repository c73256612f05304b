"""Wall-clock time as services read it: injected everywhere, so tests move it instead of waiting."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""Aware UTC now."""


def utc_now() -> datetime:
    """The production clock."""
    return datetime.now(UTC)
