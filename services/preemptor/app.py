"""The preemptor service: workload-aware preemption, one active replica on the shared fenced lease.

Wiring only: a leased service around the core's `PreemptorStateMachine`. Consumed events become its
inputs (handlers.py); a `preemption.requested` is answered on the next pass, on the state as it is then;
each pass's decisions are written in one fenced transaction (store.py), so two preemptors never choose
overlapping victims.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial

from libs.core.preemption import PreemptionOutput, PreemptorSettings, PreemptorStateMachine
from libs.db.ports import UnitOfWork
from libs.db.records import Fence
from libs.events.envelope import Envelope, EventPayload
from libs.events.scheduling import PreemptionRequested
from libs.leasing.leased_service import LeasedService
from libs.runtime.clock import Clock, utc_now
from libs.runtime.settings import PodwaySettings
from services.preemptor.handlers import SUBJECTS, cluster_input
from services.preemptor.store import load_world, unschedulable_groups, write_outputs

log = logging.getLogger(__name__)


class PreemptorService(LeasedService[PreemptorStateMachine, PreemptionOutput]):
    """`start()` / `stop()`; `clock` times the lease, the nominations and every written timestamp."""

    name = "preemptor"
    subjects = SUBJECTS

    def __init__(
        self,
        settings: PodwaySettings,
        *,
        clock: Clock = utc_now,
        holder: str | None = None,
        tick_s: float = 0.05,
        preemptor_settings: PreemptorSettings | None = None,
    ) -> None:
        super().__init__(settings, clock=clock, holder=holder, tick_s=tick_s)
        self.preemptor_settings = preemptor_settings or PreemptorSettings(fair_sharing=settings.fair_sharing)

    async def load(self, uow: UnitOfWork, now: float) -> PreemptorStateMachine:
        world = await load_world(uow, self.clock())
        waiting = await unschedulable_groups(uow)
        machine = PreemptorStateMachine(self.preemptor_settings, timer=time.perf_counter)
        await asyncio.to_thread(partial(machine.load, world, now=now, unschedulable=waiting))
        log.info("preemptor world", extra={"pods": len(machine.cluster.book.pods)})
        return machine

    def apply(
        self, world: PreemptorStateMachine, envelope: Envelope, payload: EventPayload, now: float
    ) -> None:
        if isinstance(payload, PreemptionRequested):
            world.request(payload.podgroup.uid, str(envelope.event_id))
            return
        event = cluster_input(envelope, payload)
        if event is not None:
            world.handle(event, now=now)

    def run_pass(self, world: PreemptorStateMachine, now: float) -> list[PreemptionOutput]:
        return world.run_pass(now)

    def next_wakeup(self, world: PreemptorStateMachine) -> float | None:
        return world.next_wakeup()

    async def write(self, uow: UnitOfWork, outputs: list[PreemptionOutput], fence: Fence) -> None:
        await write_outputs(uow, outputs, now=self.clock())
