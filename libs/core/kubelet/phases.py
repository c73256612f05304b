"""A pod's phase and its containers' states from how their processes ended, in kubelet's words."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

START_ERROR_EXIT_CODE = 128
"""The exit code containerd reports for a container whose process never started."""


class ContainerReason(StrEnum):
    COMPLETED = "Completed"
    ERROR = "Error"
    CREATE_CONTAINER_ERROR = "CreateContainerError"
    CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
    RUN_CONTAINER_ERROR = "RunContainerError"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"


@dataclass(frozen=True, slots=True)
class ContainerEnd:
    """How one run of a container ended: its exit code, or why it never started (`reason` and `message`)."""

    name: str
    exit_code: int
    started_at: str
    finished_at: str
    reason: str = ""
    message: str = ""

    @property
    def terminated_reason(self) -> str:
        if self.reason:
            return self.reason
        return ContainerReason.COMPLETED if self.exit_code == 0 else ContainerReason.ERROR

    def state(self) -> dict[str, Any]:
        """`state.terminated` as kubelet writes it."""
        terminated: dict[str, Any] = {
            "exitCode": self.exit_code,
            "reason": self.terminated_reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }
        if self.message:
            terminated["message"] = self.message
        return {"terminated": terminated}


@dataclass(frozen=True, slots=True)
class PodEnd:
    phase: str
    reason: str
    message: str


def container_status(
    name: str, image: str, state: dict[str, Any], restarts: int, last: ContainerEnd | None
) -> dict[str, Any]:
    """One entry of `containerStatuses`; the image is recorded, never pulled."""
    status: dict[str, Any] = {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": "running" in state,
        "started": "running" in state,
        "restartCount": restarts,
        "state": state,
    }
    if last is not None:
        status["lastState"] = last.state()
    return status


def pod_end(ends: list[ContainerEnd], *, init_failed: ContainerEnd | None = None) -> PodEnd:
    """The terminal phase once no container will run again: Succeeded when every container exited 0, else
    Failed with the first failure's reason (an init container's failure ends the pod before its containers)."""
    failed = init_failed or next((end for end in ends if end.exit_code != 0), None)
    if failed is None:
        return PodEnd("Succeeded", "", "")
    where = "init container" if init_failed is not None else "container"
    message = failed.message or f"{where} {failed.name} exited with code {failed.exit_code}"
    return PodEnd("Failed", failed.terminated_reason, message)
