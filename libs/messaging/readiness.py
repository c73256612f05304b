"""What a service's health beat says of its connections (NATS, the database): the readiness probe's input."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream.nats import NatsBroker

from libs.messaging.broker import bus_state


def connection_states(
    broker: NatsBroker, database: Callable[[], Awaitable[str]] | None = None
) -> Callable[[], Awaitable[dict[str, object]]]:
    """For `beat_forever(connections=...)`: NATS's state (`connected`, `reconnecting`, `closed`) and, for a
    service with a database, what `database()` says of it (`libs.db.reachability.database_check`)."""

    async def states() -> dict[str, object]:
        found: dict[str, object] = {"nats": bus_state(broker)}
        if database is not None:
            found["database"] = await database()
        return found

    return states
