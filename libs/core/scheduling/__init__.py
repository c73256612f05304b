"""Pure scheduling core: the scheduler state machine, its cluster snapshot, PodGroup scheduling cycle,
queue, queueing hints and PodGroup lifecycle.

No I/O and no clock reads: time comes in as `now` (seconds), so the simulator replays it exactly.
"""

# ruff: noqa: E402 - the compiled modules are chosen before any of them is imported
from .native import use_compiled

COMPILED = use_compiled(__path__)
"""Whether the hot modules run compiled by mypyc (see `native`); before any of them is imported."""
CORE = "compiled (mypyc)" if COMPILED else "interpreted"
"""The same, as benchmarks and logs say it."""

from .cycle import schedule_podgroup
from .lifecycle import (
    Condition,
    ConditionReason,
    ConditionType,
    GangRestart,
    PodGroupPhase,
    PodPhase,
    decide_gang_restart,
    podgroup_phase,
)
from .machine import MachineSettings, SchedulerStateMachine
from .model import (
    BLOCK_KEY,
    DEFAULT_SCHEDULER_NAME,
    DEFAULT_TOPOLOGY_KEYS,
    HOSTNAME_KEY,
    RACK_KEY,
    ZONE_KEY,
    CycleDecision,
    CycleResult,
    GangReason,
    GangRestartPolicy,
    Node,
    NodeAssignment,
    NodeFilterReason,
    Placement,
    PodGroup,
    PodRequest,
    ResourceTotals,
    Taint,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyDomainRef,
    Unschedulable,
)
from .queue import ClusterEvent, PodGroupTimedOut, QueueReason, QueueState, SchedulingQueue, backoff_seconds
from .snapshot import ClusterSnapshot, PlacementConflict

__all__ = [
    "BLOCK_KEY",
    "DEFAULT_SCHEDULER_NAME",
    "DEFAULT_TOPOLOGY_KEYS",
    "HOSTNAME_KEY",
    "RACK_KEY",
    "ZONE_KEY",
    "ClusterEvent",
    "ClusterSnapshot",
    "Condition",
    "ConditionReason",
    "ConditionType",
    "CycleDecision",
    "CycleResult",
    "GangReason",
    "GangRestart",
    "GangRestartPolicy",
    "MachineSettings",
    "Node",
    "NodeAssignment",
    "NodeFilterReason",
    "Placement",
    "PlacementConflict",
    "PodGroup",
    "PodGroupPhase",
    "PodGroupTimedOut",
    "PodPhase",
    "PodRequest",
    "QueueReason",
    "QueueState",
    "ResourceTotals",
    "SchedulerStateMachine",
    "SchedulingQueue",
    "Taint",
    "TaintEffect",
    "Toleration",
    "TolerationOperator",
    "TopologyDomainRef",
    "Unschedulable",
    "backoff_seconds",
    "decide_gang_restart",
    "podgroup_phase",
    "schedule_podgroup",
]
