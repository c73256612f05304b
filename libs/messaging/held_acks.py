"""Messages a consumer handled but may not acknowledge yet.

A leased service applies events to an in-memory world, so handling an event proves nothing durable: a
leader paused past its lease may resume, fetch events from the durable consumer it shares with its
successor, and apply them to a world whose writes are then refused. Were it to acknowledge them, the new
leader would never see them. So such a consumer holds its acknowledgements, and the service acknowledges
what it applied only after a write fenced by its lease epoch, begun after they were applied, committed; a
term that ends gives back what it holds (a negative acknowledgement, so the next leader gets it at once).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from nats.aio.msg import Msg


class HeldAcks:
    """The acknowledgements of handled messages, held until `ack` (or `nak`) of what `take` returned."""

    def __init__(self) -> None:
        self._held: list[Msg] = []

    def __len__(self) -> int:
        return len(self._held)

    async def hold(self, messages: Sequence[Msg]) -> None:
        """A consumer's settlement: keep them unacknowledged."""
        self._held.extend(messages)

    def take(self) -> list[Msg]:
        """What was handled up to now, to acknowledge once a fenced write begun after now commits."""
        taken, self._held = self._held, []
        return taken

    def put_back(self, taken: list[Msg]) -> None:
        """Not acknowledged yet after all: held again, ahead of what came since."""
        self._held = taken + self._held

    @staticmethod
    async def ack(taken: Sequence[Msg]) -> None:
        for msg in taken:
            with contextlib.suppress(Exception):  # a connection that is gone leaves them to redelivery
                await msg.ack()

    async def give_back(self, taken: Sequence[Msg] = (), *, delay_s: float = 0.0) -> None:
        """Everything held (and `taken`) is to be delivered again after `delay_s`: to this consumer (its world
        was read again), or once a term is over to whoever leads next (a delay longer than the stopped
        consumer's last pull request lives, so that the server does not hand them to that request)."""
        for msg in [*taken, *self.take()]:
            with contextlib.suppress(Exception):
                await msg.nak(delay=delay_s or None)
