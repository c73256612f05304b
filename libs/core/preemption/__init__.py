"""Workload-aware preemption: the victim search (`find_victims`) and the preemptor's state machine."""

from .candidates import CandidateIndex
from .model import (
    Cost,
    DisruptionMode,
    PreemptionDecision,
    PreemptionReason,
    Preemptor,
    RunningPod,
    SearchSettings,
    UnitOwner,
    Victim,
    VictimReason,
)
from .search import find_victims
from .world import (
    NominationEnded,
    NominationEndReason,
    Preempted,
    PreemptionOutput,
    PreemptorSettings,
    PreemptorStateMachine,
)

__all__ = [
    "CandidateIndex",
    "Cost",
    "DisruptionMode",
    "NominationEndReason",
    "NominationEnded",
    "Preempted",
    "PreemptionDecision",
    "PreemptionOutput",
    "PreemptionReason",
    "Preemptor",
    "PreemptorSettings",
    "PreemptorStateMachine",
    "RunningPod",
    "SearchSettings",
    "UnitOwner",
    "Victim",
    "VictimReason",
    "find_victims",
]
