"""Column types that behave the same on PostgreSQL and SQLite."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

#: JSON documents: JSONB on PostgreSQL (indexable, compared by value), JSON text on SQLite.
JsonDocument: TypeEngine[Any] = JSON().with_variant(JSONB(), "postgresql")


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on every dialect.

    This is the one place that normalises time: SQLite stores text and reads it back naive, PostgreSQL reads
    back aware in the session time zone. Naive datetimes are refused on the way in, so no local time leaks in.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = _utc(value)
        # SQLite keeps the text as given; dropping the offset keeps values comparable as strings.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: pass an aware UTC datetime")
    return value.astimezone(UTC)


def sqlite_time(value: datetime) -> str:
    """An aware datetime as `UtcDateTime` stores it on SQLite (naive UTC text, to the microsecond), for
    statements written for the driver."""
    return _utc(value).replace(tzinfo=None).isoformat(" ", "microseconds")


def json_text(value: Any) -> str:
    """A JSON document as the text Podway stores and compares."""
    # Sorted keys: equal documents serialise to equal text, which SQLite compares. orjson is ~5x faster than
    # json here, which matters when admission writes thousands of objects a second.
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # what orjson refuses (e.g. non-string keys) the standard library still writes
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def json_value(text: str | bytes) -> Any:
    """A stored JSON document read back (the engines' deserializer): orjson, several times faster than json on
    the documents every status write reads; what orjson refuses (integers beyond 64 bits) json still reads."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
