"""Whether an exited container starts again, and when: kubelet's restartPolicy and its crash back-off."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class RestartPolicy(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"


@dataclass(frozen=True, slots=True)
class BackOff:
    """Kubelet's crash back-off: 10 s after the first crash, doubled each time up to 5 min, and forgotten once
    a container ran `reset_s` without crashing."""

    initial_s: float = 10.0
    max_s: float = 300.0
    reset_s: float = 600.0


def restart_policy_of(spec: dict[str, object]) -> RestartPolicy:
    """The pod's restartPolicy; Always when absent, as the API server defaults it."""
    try:
        return RestartPolicy(str(spec.get("restartPolicy") or RestartPolicy.ALWAYS))
    except ValueError:
        return RestartPolicy.ALWAYS


def restarts(policy: RestartPolicy, exit_code: int) -> bool:
    """Whether a container that exited with `exit_code` is started again under `policy`."""
    if policy is RestartPolicy.ALWAYS:
        return True
    return policy is RestartPolicy.ON_FAILURE and exit_code != 0


def init_restarts(policy: RestartPolicy, exit_code: int) -> bool:
    """An init container that failed is retried unless the pod never restarts (kubelet runs init containers
    under OnFailure when the pod says Always)."""
    return exit_code != 0 and policy is not RestartPolicy.NEVER


def restart_delay(back_off: BackOff, crashes: int, ran_s: float) -> float:
    """Seconds to wait before starting a container again after its `crashes`-th exit in a row (1 = first);
    a container that ran `back_off.reset_s` or longer starts its back-off afresh."""
    if ran_s >= back_off.reset_s:
        crashes = 1
    return min(back_off.max_s, back_off.initial_s * (1 << min(32, max(0, crashes - 1))))
