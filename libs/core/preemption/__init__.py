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
    Output,
    Preempted,
    PreemptorSettings,
    PreemptorStateMachine,
)

__all__ = [
    "CandidateIndex",
    "Cost",
    "DisruptionMode",
    "NominationEndReason",
    "NominationEnded",
    "Output",
    "Preempted",
    "PreemptionDecision",
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
