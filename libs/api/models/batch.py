"""`batch/v1` Job: the fields the Job controller (phase 1) turns into a gang or plain pods."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from libs.api.kinds import BATCH_V1
from libs.api.models.base import NONE_TO_DICT, NONE_TO_LIST, ApiModel, PassThroughModel
from libs.api.models.core import PodSpec
from libs.api.models.meta import ApiObject, ObjectMeta

COMPLETION_MODE_INDEXED: Final = "Indexed"
COMPLETION_MODE_NON_INDEXED: Final = "NonIndexed"
COMPLETION_MODES: Final = (COMPLETION_MODE_NON_INDEXED, COMPLETION_MODE_INDEXED)
JOB_RESTART_POLICIES: Final = ("OnFailure", "Never")


class PodTemplateSpec(PassThroughModel):
    """The pods a Job creates: metadata (labels, annotations) and spec."""

    metadata: Annotated[ObjectMeta, NONE_TO_DICT] = Field(default_factory=ObjectMeta)
    spec: Annotated[PodSpec, NONE_TO_DICT] = Field(default_factory=PodSpec)


POD_FAILURE_ACTIONS: Final = ("Count", "FailIndex", "FailJob", "Ignore")
EXIT_CODE_OPERATORS: Final = ("In", "NotIn")
CONDITION_STATUSES: Final = ("False", "True", "Unknown")


class PodFailurePolicyOnExitCodesRequirement(ApiModel):
    """Exit codes a rule matches (of any container, or of `containerName`); exit code 0 never matches."""

    container_name: str | None = None
    operator: str | None = None
    values: Annotated[list[int], NONE_TO_LIST] = Field(default_factory=list)


class PodFailurePolicyOnPodConditionsPattern(ApiModel):
    """A pod condition a rule matches (`status` defaults to True)."""

    type: str | None = None
    status: str | None = None


class PodFailurePolicyRule(ApiModel):
    """One rule: its action when a failed pod's exit codes or conditions match."""

    action: str | None = None
    on_exit_codes: PodFailurePolicyOnExitCodesRequirement | None = None
    on_pod_conditions: Annotated[list[PodFailurePolicyOnPodConditionsPattern], NONE_TO_LIST] = Field(
        default_factory=list
    )


class PodFailurePolicy(ApiModel):
    """How failed pods count toward the Job's backoffLimit: rules tried in order, the first match wins."""

    rules: Annotated[list[PodFailurePolicyRule], NONE_TO_LIST] = Field(default_factory=list)


class JobSpec(PassThroughModel):
    """Job spec; backoffLimitPerIndex, ttlSecondsAfterFinished and the like ride along."""

    PASSED_THROUGH = frozenset(
        {
            "activeDeadlineSeconds",
            "backoffLimitPerIndex",
            "managedBy",
            "manualSelector",
            "maxFailedIndexes",
            "podReplacementPolicy",
            "selector",
            "successPolicy",
            "ttlSecondsAfterFinished",
        }
    )

    parallelism: int | None = None
    completions: int | None = None
    completion_mode: str | None = None
    backoff_limit: int | None = None
    suspend: bool | None = None
    template: PodTemplateSpec | None = None
    pod_failure_policy: PodFailurePolicy | None = None


class JobCondition(PassThroughModel):
    """`Complete`, `Failed`, `Suspended`, ... conditions of a Job."""

    PASSED_THROUGH = frozenset({"lastProbeTime", "lastTransitionTime"})

    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None


class JobStatus(PassThroughModel):
    """Counts of active, succeeded and failed pods, and the terminal conditions."""

    PASSED_THROUGH = frozenset(
        {"completedIndexes", "failedIndexes", "terminating", "uncountedTerminatedPods"}
    )

    active: int | None = None
    ready: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    conditions: Annotated[list[JobCondition], NONE_TO_LIST] = Field(default_factory=list)
    start_time: str | None = None
    completion_time: str | None = None


class Job(ApiObject):
    """`batch/v1` Job."""

    API_VERSION = BATCH_V1
    KIND = "Job"

    spec: Annotated[JobSpec, NONE_TO_DICT] = Field(default_factory=JobSpec)
    status: Annotated[JobStatus, NONE_TO_DICT] = Field(default_factory=JobStatus)


def is_gang_job(job: Job) -> bool:
    """Whether the Job controller turns this Job into one gang: Indexed, parallelism > 1 and equal to
    completions, and a pod template without its own schedulingGroup."""
    spec = job.spec
    template_group = spec.template.spec.scheduling_group if spec.template is not None else None
    return (
        spec.completion_mode == COMPLETION_MODE_INDEXED
        and spec.parallelism is not None
        and spec.parallelism > 1
        and spec.parallelism == spec.completions
        and template_group is None
    )
