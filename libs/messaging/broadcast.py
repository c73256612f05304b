"""Core-NATS fan-out: every subscriber gets every message (no queue group, no JetStream). For state that
replicas of one service share with each other and may lose without harm, such as the router processes' breaker
outcomes."""

from __future__ import annotations

import logging
from collections.abc import Callable

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from libs.messaging.broker import connection

log = logging.getLogger(__name__)

Broker = NatsBroker
"""The broker type, for modules that may not import the NATS libraries themselves."""


class Listener:
    """A subscription made by `listen`; `stop()` ends it."""

    def __init__(self, subscription: Subscription) -> None:
        self._subscription: Subscription | None = subscription

    async def stop(self) -> None:
        if self._subscription is not None:
            subscription, self._subscription = self._subscription, None
            await subscription.unsubscribe()


async def listen(broker: NatsBroker, subject: str, handler: Callable[[bytes], None]) -> Listener:
    """Call `handler(data)` with every message on `subject`; a handler exception is logged and skipped."""

    async def on_message(msg: Msg) -> None:
        try:
            handler(msg.data)
        except Exception:
            log.exception("message on %s not handled", subject)

    return Listener(await connection(broker).subscribe(subject, cb=on_message))


async def broadcast(broker: NatsBroker, subject: str, data: bytes) -> None:
    """Publish `data` to every listener of `subject`."""
    await connection(broker).publish(subject, data)
