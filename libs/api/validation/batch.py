"""Validation of `batch/v1` Job."""

from __future__ import annotations

from typing import Final

from libs.api.errors import FieldError, FieldPath, forbidden, invalid, required
from libs.api.models.batch import (
    COMPLETION_MODE_INDEXED,
    COMPLETION_MODES,
    JOB_RESTART_POLICIES,
    Job,
    is_gang_job,
)
from libs.api.validation.common import check_enum, check_minimum, check_unchanged
from libs.api.validation.core import validate_pod_spec
from libs.api.validation.meta import validate_annotations, validate_labels, validate_object_meta

SPEC: Final = FieldPath("spec")
GANG_RESIZED_ALONE: Final = (
    "may only be changed in tandem with spec.completions for a gang-scheduled Job (completionMode Indexed, "
    "parallelism == completions): the gang is resized by changing both"
)
MIN_GANG_PARALLELISM: Final = 2


def validate_job(job: Job) -> list[FieldError]:
    """Metadata, counts, completion mode and pod template of a Job."""
    spec = job.spec
    errors = validate_object_meta(job.metadata, namespaced=True)
    errors += check_minimum(spec.parallelism, SPEC.child("parallelism"), 0)
    errors += check_minimum(spec.completions, SPEC.child("completions"), 0)
    errors += check_minimum(spec.backoff_limit, SPEC.child("backoffLimit"), 0)
    errors += check_enum(spec.completion_mode, SPEC.child("completionMode"), COMPLETION_MODES)
    if spec.completion_mode == COMPLETION_MODE_INDEXED and spec.completions is None:
        errors.append(required(SPEC.child("completions"), "when completion mode is Indexed"))
    return errors + _validate_template(job, SPEC.child("template"))


def _validate_template(job: Job, path: FieldPath) -> list[FieldError]:
    template = job.spec.template
    if template is None:
        return [required(path)]
    metadata = path.child("metadata")
    errors = validate_labels(template.metadata.labels, metadata.child("labels"))
    errors += validate_annotations(template.metadata.annotations, metadata.child("annotations"))
    errors += validate_pod_spec(template.spec, path.child("spec"))
    # Unlike the API server, a missing restartPolicy is accepted (pods then simply are not restarted).
    return errors + check_enum(
        template.spec.restart_policy, path.child("spec", "restartPolicy"), JOB_RESTART_POLICIES
    )


def validate_job_update(old: Job, new: Job) -> list[FieldError]:
    """Completion mode and the pod template are immutable. Completions are immutable too, except that an
    Indexed Job may change them in tandem with parallelism (upstream's elastic Indexed Jobs); a gang Job
    is resized that way alone, and stays a gang (parallelism of at least 2)."""
    errors: list[FieldError] = []
    if is_gang_job(old):
        errors += _gang_resize_errors(old, new)
    errors += check_unchanged(
        old.spec.completion_mode, new.spec.completion_mode, SPEC.child("completionMode")
    )
    errors += _completions_errors(old, new)
    errors += check_unchanged(old.spec.template, new.spec.template, SPEC.child("template"))
    return errors


def _gang_resize_errors(old: Job, new: Job) -> list[FieldError]:
    parallelism = new.spec.parallelism
    if parallelism == old.spec.parallelism:
        return []
    if parallelism != new.spec.completions:
        return [forbidden(SPEC.child("parallelism"), GANG_RESIZED_ALONE)]
    if parallelism is not None and parallelism < MIN_GANG_PARALLELISM:
        detail = f"must be greater than or equal to {MIN_GANG_PARALLELISM} for a gang-scheduled Job"
        return [invalid(SPEC.child("parallelism"), parallelism, detail)]
    return []


def _completions_errors(old: Job, new: Job) -> list[FieldError]:
    """As kube-apiserver's `validateCompletions` with ElasticIndexedJob on."""
    path = SPEC.child("completions")
    if {old.spec.completion_mode, new.spec.completion_mode} != {COMPLETION_MODE_INDEXED}:
        return check_unchanged(old.spec.completions, new.spec.completions, path)
    if old.spec.completions == new.spec.completions or new.spec.completions is None:
        return []
    if new.spec.completions != new.spec.parallelism:
        return [invalid(path, new.spec.completions, "can only be modified in tandem with spec.parallelism")]
    return []
