"""Breaker state shared by the router processes of one front: each process publishes the attempt outcomes its
breakers heard every `interval_s` on `podway.router.outcomes`, and feeds its own breakers with its peers'.

Each process keeps its own breakers (a decision never waits on the bus), but they hear the whole traffic, so a
deployment failing for one process opens its breaker in all of them within one interval, and the ramp after a
probe counts every process's attempts. A malformed message is logged and skipped (it is not an event: there is
nothing to dead-letter); outcomes of an interval when the bus is away are not shared.
"""

from __future__ import annotations

import asyncio
import json
import logging

from pydantic import ValidationError

from libs.events.inference import ROUTER_OUTCOMES_SUBJECT, AttemptOutcomes
from libs.messaging.broadcast import Broker, Listener, broadcast, listen
from libs.router import Router

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 0.05


class PeerOutcomes:
    """`await start(broker)`, then `run()` as a task; `publish_now()` sends what is pending at once."""

    def __init__(self, router: Router, instance: str, *, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self._router = router
        self._pending = asyncio.Event()
        router.on_outcome = self._pending.set
        self._instance = instance
        # Every process hears its own messages too: those are known by their first bytes, before parsing them.
        self._own_prefix = b'{"instance":' + json.dumps(instance).encode() + b","
        self.interval_s = interval_s
        self._broker: Broker | None = None
        self._listener: Listener | None = None
        self.received = 0

    async def start(self, broker: Broker) -> None:
        self._broker = broker
        self._listener = await listen(broker, ROUTER_OUTCOMES_SUBJECT, self.receive)

    async def run(self) -> None:
        """Share what the breakers heard `interval_s` after the first outcome of a batch; idle, never wake."""
        while True:
            await self._pending.wait()
            await asyncio.sleep(self.interval_s)
            self._pending.clear()
            try:
                await self.publish_now()
            except Exception as exc:
                log.warning("breaker outcomes not shared: %r", exc)

    async def publish_now(self) -> None:
        outcomes = self._router.drain_outcomes()
        if outcomes and self._broker is not None:
            message = AttemptOutcomes(instance=self._instance, outcomes=outcomes)
            await broadcast(self._broker, ROUTER_OUTCOMES_SUBJECT, message.model_dump_json().encode())

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()

    def receive(self, data: bytes) -> None:
        """Feed the breakers with a peer's outcomes (this process's own are skipped)."""
        if data.startswith(self._own_prefix):
            return
        try:
            message = AttemptOutcomes.model_validate_json(data)
        except ValidationError as exc:
            log.warning("malformed breaker outcomes skipped: %s", exc)
            return
        if message.instance == self._instance:
            return
        self.received += len(message.outcomes)
        self._router.record_peer_outcomes(message.outcomes)
