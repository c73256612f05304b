"""The scheduler service: kube-scheduler with gang and topology-aware placement, one active replica.

Wiring only: a leased service around the core's `SchedulerStateMachine`. Consumed events become the
machine's inputs (handlers.py), its outputs are written in one fenced transaction per pass (store.py).
"""

from __future__ import annotations

import asyncio
import logging
import time

from libs.core import scheduling
from libs.core.quota.admission_fair_sharing import AdmissionFairSharing
from libs.core.scheduling import MachineSettings, SchedulerStateMachine
from libs.core.scheduling.inputs import NodesHeard
from libs.core.scheduling.node_health import NodeHealthSettings
from libs.core.scheduling.outputs import Binding, CycleRan, Output
from libs.db.ports import UnitOfWork
from libs.db.records import Fence
from libs.events.envelope import Envelope, EventPayload
from libs.leasing.leased_service import LeasedService
from libs.runtime.clock import Clock, utc_now
from libs.runtime.settings import PodwaySettings
from services.scheduler.handlers import SUBJECTS, machine_input
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.store import load_world, write_outputs

log = logging.getLogger(__name__)


class SchedulerService(LeasedService[SchedulerStateMachine, Output]):
    """`start()` / `stop()`; `clock` times the lease, the queue and every written timestamp."""

    name = "scheduler"
    subjects = SUBJECTS
    serves_metrics = True

    def __init__(
        self,
        settings: PodwaySettings,
        *,
        clock: Clock = utc_now,
        holder: str | None = None,
        tick_s: float = 0.05,
        machine_settings: MachineSettings | None = None,
    ) -> None:
        super().__init__(settings, clock=clock, holder=holder, tick_s=tick_s)
        self.machine_settings = machine_settings or MachineSettings(
            claims_timeout_s=settings.claims_timeout_seconds,
            fair_sharing=settings.fair_sharing,
            admission_fair_sharing=admission_fair_sharing(settings),
            node_health=NodeHealthSettings(
                monitor_grace_s=settings.node_monitor_grace_seconds, eviction_s=settings.node_eviction_seconds
            ),
        )
        self.observe_every_s = settings.node_heartbeat_seconds / 2
        self.metrics = SchedulerMetrics()
        self.metrics_port: int | None = None

    async def start(self) -> None:
        if self.settings.metrics_port >= 0:
            self.metrics_port = self.metrics.serve(self.settings.metrics_port, self.settings.metrics_host)
        await super().start()

    async def stop(self, *, release_lease: bool = True) -> None:
        await super().stop(release_lease=release_lease)
        self.metrics.close()

    async def load(self, uow: UnitOfWork, now: float) -> SchedulerStateMachine:
        world = await load_world(uow, self.clock())
        machine = SchedulerStateMachine(self.machine_settings, timer=time.perf_counter)
        # In a thread, so that the service's loop keeps taking events while a large world is built.
        await asyncio.to_thread(machine.load, world, now=now)
        log.info(
            "scheduler world",
            extra={
                "nodes": len(machine.snapshot),
                "pods": len(machine.book.pods),
                "core": scheduling.CORE,
            },
        )
        return machine

    def apply(
        self, world: SchedulerStateMachine, envelope: Envelope, payload: EventPayload, now: float
    ) -> None:
        event = machine_input(envelope, payload)
        if event is not None:
            world.handle(event, now=now)

    async def observe(self, world: SchedulerStateMachine, now: float) -> None:
        """The node agents' beat counts: a node whose count stops moving goes NotReady, then lost."""
        async with self.plain_uow() as uow:
            beats = await uow.node_heartbeats.counts()
        if beats:
            world.handle(NodesHeard(beats), now=self.seconds())

    def run_pass(self, world: SchedulerStateMachine, now: float) -> list[Output]:
        outputs = world.run_pass(now)
        self.metrics.queue_depth.set(len(world.queue))
        return outputs

    def next_wakeup(self, world: SchedulerStateMachine) -> float | None:
        return world.next_wakeup()

    async def write(self, uow: UnitOfWork, outputs: list[Output], fence: Fence) -> None:
        await write_outputs(uow, outputs, fence=fence, now=self.clock())

    def written(self, outputs: list[Output], took_s: float) -> None:
        for output in outputs:
            binding = output.bind if isinstance(output, CycleRan) else output
            if isinstance(binding, Binding):
                self.metrics.pods_bound.inc(len(binding.placements))
            if isinstance(output, CycleRan):
                result = "placed" if output.decision.placed else "unschedulable"
                self.metrics.cycle_seconds.labels(result).observe(output.cycle_ms / 1000)

    def leadership_changed(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)

    def health(self) -> dict[str, object]:
        return {"metrics_port": self.metrics_port}


def admission_fair_sharing(settings: PodwaySettings) -> AdmissionFairSharing | None:
    """Kueue's `admissionFairSharing` configuration from the settings; None (off) without a half-life."""
    if settings.admission_fair_sharing_half_life_seconds is None:
        return None
    return AdmissionFairSharing(
        half_life_s=settings.admission_fair_sharing_half_life_seconds,
        sampling_interval_s=settings.admission_fair_sharing_sampling_seconds,
        resource_weights=dict(settings.admission_fair_sharing_resource_weights),
    )
