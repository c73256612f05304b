"""Job controller phase 1: a batch/v1 Job becomes one gang (Workload + PodGroup + Pods) or plain pods.

Names are deterministic: a gang Job `J` yields Workload `J`, PodGroup `J-worker-0` and Pods
`J-worker-0-<index>`; other Jobs yield Pods `J-<index>`. Their uids derive from the Job's uid, kind and name,
so each incarnation of a Job (each uid) generates new identities."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from libs.api import annotations as podway
from libs.api.kinds import BATCH_V1
from libs.api.models.batch import COMPLETION_MODE_INDEXED, Job, PodTemplateSpec, is_gang_job
from libs.api.models.core import Pod, PodSchedulingGroup
from libs.api.models.kueue import QUEUE_NAME_LABEL
from libs.api.models.meta import ObjectMeta, OwnerReference, derive_owned_uid, derive_uid
from libs.api.models.scheduling import (
    GangSchedulingPolicy,
    PodGroup,
    PodGroupSchedulingConstraints,
    PodGroupSchedulingPolicy,
    PodGroupTemplate,
    TopologyConstraint,
    TypedLocalObjectReference,
    Workload,
    WorkloadSpec,
)
from libs.api.podgroups import instantiate_pod_group
from libs.api.validation.batch import validate_job_update

GANG_TEMPLATE_NAME: Final = "worker"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
DEFAULT_JOB_RESTART_POLICY: Final = "Never"

__all__ = [
    "GANG_TEMPLATE_NAME",
    "JobExpansion",
    "expand_job",
    "gang_pod_group",
    "gang_pod_group_name",
    "gang_pod_name",
    "is_gang_job",
    "job_pods",
    "job_uid",
    "terminal_condition",
    "validate_job_update",
]


@dataclass(frozen=True)
class JobExpansion:
    """What a Job becomes: for a gang, its Workload, PodGroup and pods; otherwise pods only."""

    workload: Workload | None
    podgroup: PodGroup | None
    pods: list[Pod] = field(default_factory=list)


def job_uid(job: Job) -> str:
    """The Job's uid, derived from namespace and name when the manifest has none."""
    return job.metadata.uid or derive_uid("Job", job.namespace, job.name)


def gang_pod_group_name(job_name: str) -> str:
    """`J-worker-0`: the one PodGroup of a gang Job."""
    return f"{job_name}-{GANG_TEMPLATE_NAME}-0"


def gang_pod_name(job_name: str, index: int) -> str:
    """`J-worker-0-<index>`: the pod of a gang Job with this completion index."""
    return f"{gang_pod_group_name(job_name)}-{index}"


def expand_job(job: Job) -> JobExpansion:
    """The objects the Job controller creates for a (defaulted) Job.

    A gang Job (see is_gang_job) yields a Workload with one gang template (`minCount = parallelism`,
    `controllerRef` = the Job), one PodGroup and `parallelism` pods carrying `schedulingGroup`; the Job's
    `podway.io/*` gang annotations (gang-restart defaulting to Always) and its pod template's
    priorityClassName carry over to the Workload template and the PodGroup. Other Jobs yield their first
    wave of pods (`min(parallelism, completions)`). A suspended Job gets no pods yet. Every object is
    controller-owned by the Job."""
    if not is_gang_job(job):
        return JobExpansion(workload=None, podgroup=None, pods=_plain_pods(job))
    workload = _gang_workload(job)
    pod_group = _gang_pod_group(job, workload)
    pods = [] if job.spec.suspend else [_gang_pod(job, index) for index in range(job.spec.parallelism or 0)]
    return JobExpansion(workload=workload, podgroup=pod_group, pods=pods)


def gang_pod_group(job: Job, min_count: int) -> PodGroup:
    """The gang Job's PodGroup for a gang of `min_count` pods: a restarted gang runs only the indexes that
    did not succeed, so its new PodGroup waits for those alone."""
    pod_group = _gang_pod_group(job, _gang_workload(job))
    policy = PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=min_count))
    return pod_group.model_copy(
        update={"spec": pod_group.spec.model_copy(update={"scheduling_policy": policy})}
    )


def _gang_pod_group(job: Job, workload: Workload) -> PodGroup:
    template = workload.spec.pod_group_templates[0]
    pod_group = instantiate_pod_group(workload, template, gang_pod_group_name(job.name))
    pod_group.metadata = _owned_metadata(
        job, "PodGroup", pod_group.name, labels=_queue_label(job), annotations=_gang_annotations(job)
    )
    return pod_group


def job_pods(job: Job, indexes: list[int]) -> list[Pod]:
    """The Job's pods with these completion indexes (a NonIndexed Job's: these name numbers)."""
    if is_gang_job(job):
        return [_gang_pod(job, index) for index in indexes]
    return [_pod(job, f"{job.name}-{index}", index) for index in indexes]


def _gang_annotations(job: Job) -> dict[str, str]:
    carried = {
        key: value for key, value in job.metadata.annotations.items() if key in podway.GANG_ANNOTATIONS
    }
    carried.setdefault(podway.GANG_RESTART, podway.GANG_RESTART_ALWAYS)
    return carried


def _queue_label(job: Job) -> dict[str, str]:
    """The Job's `kueue.x-k8s.io/queue-name`, carried to its Workload and PodGroup (whose quota it names)."""
    queue = job.metadata.labels.get(QUEUE_NAME_LABEL)
    return {QUEUE_NAME_LABEL: queue} if queue else {}


def _gang_workload(job: Job) -> Workload:
    template_spec = job.spec.template.spec if job.spec.template is not None else None
    hard_key = podway.topology_key(job.metadata.annotations)
    template = PodGroupTemplate(
        name=GANG_TEMPLATE_NAME,
        scheduling_policy=PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=job.spec.parallelism)),
        scheduling_constraints=(
            PodGroupSchedulingConstraints(topology=[TopologyConstraint(key=hard_key)]) if hard_key else None
        ),
        priority_class_name=template_spec.priority_class_name if template_spec is not None else None,
    )
    controller = TypedLocalObjectReference(api_group="batch", kind="Job", name=job.name)
    return Workload(
        metadata=_owned_metadata(
            job, "Workload", job.name, labels=_queue_label(job), annotations=_gang_annotations(job)
        ),
        spec=WorkloadSpec(controller_ref=controller, pod_group_templates=[template]),
    )


def _owned_metadata(
    job: Job,
    kind: str,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> ObjectMeta:
    owner_uid = job_uid(job)
    owner = OwnerReference(
        api_version=BATCH_V1,
        kind="Job",
        name=job.name,
        uid=owner_uid,
        controller=True,
        block_owner_deletion=True,
    )
    return ObjectMeta(
        name=name,
        namespace=job.namespace,
        uid=derive_owned_uid(owner_uid, kind, name),
        labels=labels or {},
        annotations=annotations or {},
        owner_references=[owner],
    )


def _gang_pod(job: Job, index: int) -> Pod:
    pod = _pod(job, gang_pod_name(job.name, index), index)
    pod.spec.scheduling_group = PodSchedulingGroup(pod_group_name=gang_pod_group_name(job.name))
    return pod


def _plain_pods(job: Job) -> list[Pod]:
    if job.spec.suspend:
        return []
    parallelism = job.spec.parallelism or 0
    completions = job.spec.completions
    count = parallelism if completions is None else min(parallelism, completions)
    return [_pod(job, f"{job.name}-{index}", index) for index in range(count)]


def _pod(job: Job, name: str, index: int) -> Pod:
    template = job.spec.template or PodTemplateSpec()
    indexed = job.spec.completion_mode == COMPLETION_MODE_INDEXED
    uid = job_uid(job)
    labels = {
        **template.metadata.labels,
        JOB_NAME_LABEL: job.name,
        CONTROLLER_UID_LABEL: uid,
        LEGACY_JOB_NAME_LABEL: job.name,
        LEGACY_CONTROLLER_UID_LABEL: uid,
    }
    annotations = dict(template.metadata.annotations)
    if indexed:
        labels[COMPLETION_INDEX] = str(index)
        annotations[COMPLETION_INDEX] = str(index)
    if podway.RUN_SECONDS in job.metadata.annotations:
        annotations.setdefault(podway.RUN_SECONDS, job.metadata.annotations[podway.RUN_SECONDS])
    spec = template.spec.model_copy(deep=True)
    spec.restart_policy = spec.restart_policy or DEFAULT_JOB_RESTART_POLICY
    return Pod(metadata=_owned_metadata(job, "Pod", name, labels=labels, annotations=annotations), spec=spec)


def terminal_condition(status: Mapping[str, Any]) -> dict[str, Any] | None:
    """The condition a Job's status ended with (`Complete` or `Failed`, status True), None while it runs."""
    conditions = status.get("conditions") or []
    return next(
        (c for c in conditions if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"),
        None,
    )
