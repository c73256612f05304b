"""The scheduler state machine on a clock the test moves, over a small generated cluster."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from libs.cluster.generator import ClusterShape
from libs.core.scheduling import PodPhase, SchedulerStateMachine
from libs.core.scheduling.inputs import Input, ObjectStored, PodsFinished, World
from libs.core.scheduling.machine import MachineSettings
from libs.core.scheduling.objects import ApiObject
from tests.unit.scheduling.manifests import cluster, workload

SMALL = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2)  # 4 nodes, 32 GPUs, 2 racks


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Machine(SchedulerStateMachine):
    """The state machine with the test's clock at hand, so that inputs read as what happened."""

    def __init__(self, clock: Clock, settings: MachineSettings | None = None) -> None:
        super().__init__(settings)
        self.clock = clock

    def admit(self, *objects: ApiObject) -> None:
        for obj in objects:
            self.handle(ObjectStored(obj, cause=f"admitted-{obj.name}"), now=self.clock.now)

    def tell(self, event: Input) -> None:
        self.handle(event, now=self.clock.now)

    def finish(self, uids: Iterable[str], phase: PodPhase, cause: str | None = None) -> None:
        self.handle(PodsFinished(tuple(uids), phase, cause), now=self.clock.now)

    def run(self) -> list:
        return self.run_pass(self.clock.now)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def scheduler(clock: Clock) -> Machine:
    machine = Machine(clock)
    machine.load(World(cluster(SMALL) + [workload()], {}), now=clock.now)
    return machine
