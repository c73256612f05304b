"""Validation of `batch/v1` Job."""

from __future__ import annotations

from typing import Final

from libs.api.errors import FieldError, FieldPath, forbidden, required
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
GANG_PARALLELISM_FIXED: Final = (
    "may not be changed for a gang-scheduled Job (completionMode Indexed, parallelism == completions): "
    "its PodGroup's minCount is fixed"
)


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
    """A gang Job keeps its parallelism; completion mode, completions and the pod template are immutable."""
    errors: list[FieldError] = []
    if is_gang_job(old) and new.spec.parallelism != old.spec.parallelism:
        errors.append(forbidden(SPEC.child("parallelism"), GANG_PARALLELISM_FIXED))
    errors += check_unchanged(
        old.spec.completion_mode, new.spec.completion_mode, SPEC.child("completionMode")
    )
    errors += check_unchanged(old.spec.completions, new.spec.completions, SPEC.child("completions"))
    errors += check_unchanged(old.spec.template, new.spec.template, SPEC.child("template"))
    return errors
