"""A PodGroup after placement: its derived phase, and gang restart."""

from __future__ import annotations

import pytest

from libs.core.scheduling import (
    Condition,
    ConditionReason,
    ConditionType,
    GangRestartPolicy,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    decide_gang_restart,
    podgroup_phase,
)

P, R, S, F, U = PodPhase.PENDING, PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED, PodPhase.UNKNOWN
SCHEDULED = Condition(ConditionType.POD_GROUP_SCHEDULED, True, ConditionReason.SCHEDULED)
UNSCHEDULABLE = Condition(ConditionType.POD_GROUP_SCHEDULED, False, ConditionReason.UNSCHEDULABLE)
PREEMPTED = Condition(ConditionType.DISRUPTION_TARGET, True, ConditionReason.PREEMPTION_BY_SCHEDULER)


@pytest.mark.parametrize(
    ("conditions", "pods", "phase"),
    [
        ((), (P, P, P, P), PodGroupPhase.PENDING),
        ((UNSCHEDULABLE,), (P, P, P, P), PodGroupPhase.PENDING),
        ((SCHEDULED,), (P, P, P, P), PodGroupPhase.SCHEDULED),
        ((SCHEDULED,), (R, R, P, P), PodGroupPhase.SCHEDULED),
        ((SCHEDULED,), (R, R, R, R), PodGroupPhase.RUNNING),
        ((SCHEDULED,), (R, R, R, S), PodGroupPhase.SCHEDULED),
        ((SCHEDULED,), (S, S, S, S), PodGroupPhase.SUCCEEDED),
        ((SCHEDULED,), (R, R, R, F), PodGroupPhase.FAILED),
        ((UNSCHEDULABLE,), (F, F, F, F), PodGroupPhase.FAILED),
        ((SCHEDULED, PREEMPTED), (F, F, F, F), PodGroupPhase.PREEMPTED),
        ((SCHEDULED, PREEMPTED), (F, F, F, F, P, P, P, P), PodGroupPhase.PENDING),
        ((SCHEDULED, PREEMPTED), (F, F, F, F, R, R, R, R), PodGroupPhase.RUNNING),
    ],
)
def test_a_gang_phase_follows_from_its_conditions_and_pods(
    conditions: tuple[Condition, ...], pods: tuple[PodPhase, ...], phase: PodGroupPhase
) -> None:
    assert podgroup_phase(conditions, pods, gang_min_count=4) == phase


def test_a_basic_group_runs_once_one_pod_runs() -> None:
    assert podgroup_phase((SCHEDULED,), (R, P), gang_min_count=None) == PodGroupPhase.RUNNING


def test_a_group_without_pods_is_pending() -> None:
    assert podgroup_phase((), (), gang_min_count=4) == PodGroupPhase.PENDING


def _gang(policy: GangRestartPolicy) -> PodGroup:
    return PodGroup("ml", "train", uid="uid-train", gang_min_count=3, gang_restart=policy)


def test_a_broken_gang_with_restart_always_evicts_the_rest() -> None:
    pods = {"d": R, "a": P, "b": F, "c": F}

    restart = decide_gang_restart(_gang(GangRestartPolicy.ALWAYS), pods)

    assert restart is not None
    assert restart.evict == ("a", "d")
    assert restart.podgroup == "ml/train"


def test_a_lost_pod_breaks_the_gang_like_a_failed_one() -> None:
    pods = {"a": R, "b": R, "c": U}
    assert decide_gang_restart(_gang(GangRestartPolicy.ALWAYS), {**pods, "d": F}) is not None
    restart = decide_gang_restart(_gang(GangRestartPolicy.ALWAYS), pods)
    assert restart is not None
    assert restart.message == "gang dropped below minCount 3: 2 pod(s) active, 1 failed or lost"


def test_a_gang_still_at_min_count_does_not_restart() -> None:
    assert decide_gang_restart(_gang(GangRestartPolicy.ALWAYS), {"a": R, "b": R, "c": R, "d": F}) is None


def test_a_gang_that_finished_normally_does_not_restart() -> None:
    assert decide_gang_restart(_gang(GangRestartPolicy.ALWAYS), {"a": S, "b": S, "c": R}) is None


def test_restart_never_leaves_a_broken_gang_to_its_owner() -> None:
    assert decide_gang_restart(_gang(GangRestartPolicy.NEVER), {"a": R, "b": F, "c": F}) is None


def test_a_basic_group_never_restarts() -> None:
    group = PodGroup("ml", "svc", gang_restart=GangRestartPolicy.ALWAYS)
    assert decide_gang_restart(group, {"a": F}) is None
