"""Structured JSON logs on stderr, one object per line."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from libs.runtime.urls import redact_credentials

_RESERVED = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_CORRELATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("correlation_id", default=None)


@contextlib.contextmanager
def correlated(correlation_id: str | None) -> Iterator[None]:
    """Records logged inside (in this task) carry `correlation_id`: the story (PodGroup uid, request id) the
    work belongs to. Consumers set it around each event they handle."""
    token = _CORRELATION.set(correlation_id)
    try:
        yield
    finally:
        _CORRELATION.reset(token)


class JsonFormatter(logging.Formatter):
    """Renders a record as one JSON object; `extra=` fields become top-level keys. Passwords in URLs (a NATS or
    database URL with `user:password@`) are masked."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if (correlation := _CORRELATION.get()) is not None:
            entry["correlation_id"] = correlation
        entry.update({k: v for k, v in record.__dict__.items() if k not in _RESERVED})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return redact_credentials(json.dumps(entry, default=str))


class TextFormatter(logging.Formatter):
    """One line per record, passwords in URLs masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_credentials(super().format(record))


def configure_logging(service: str, level: str = "INFO", fmt: str = "json") -> None:
    """Route all logging to stderr in the chosen format; safe to call more than once."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(TextFormatter(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("aiobotocore", "botocore", "urllib3", "asyncio", "aiosqlite", "faststream.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
