"""Validation of `batch/v1` Job."""

from __future__ import annotations

from itertools import pairwise
from typing import Final

from libs.api.errors import (
    OMITTED,
    FieldError,
    FieldPath,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_many,
)
from libs.api.formats import label_key_errors
from libs.api.models.batch import (
    COMPLETION_MODE_INDEXED,
    COMPLETION_MODES,
    CONDITION_STATUSES,
    EXIT_CODE_OPERATORS,
    JOB_RESTART_POLICIES,
    POD_FAILURE_ACTIONS,
    Job,
    PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern,
    PodFailurePolicyRule,
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
MAX_POD_FAILURE_RULES: Final = 20
MAX_EXIT_CODE_VALUES: Final = 255
MAX_CONDITION_PATTERNS: Final = 20


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
    errors += _validate_template(job, SPEC.child("template"))
    return errors + _validate_pod_failure_policy(job, SPEC.child("podFailurePolicy"))


def _validate_pod_failure_policy(job: Job, path: FieldPath) -> list[FieldError]:
    """As kube-apiserver's `validatePodFailurePolicy`."""
    policy = job.spec.pod_failure_policy
    if policy is None:
        return []
    errors: list[FieldError] = []
    template = job.spec.template
    restart_policy = template.spec.restart_policy if template is not None else None
    if restart_policy != "Never":
        detail = 'only "Never" is supported when podFailurePolicy is specified'
        errors.append(invalid(SPEC.child("template", "spec", "restartPolicy"), restart_policy or "", detail))
    rules = path.child("rules")
    if len(policy.rules) > MAX_POD_FAILURE_RULES:
        errors.append(too_many(rules, len(policy.rules), MAX_POD_FAILURE_RULES))
    containers = (
        {c.name for c in [*template.spec.containers, *template.spec.init_containers]} if template else set()
    )
    for i, rule in enumerate(policy.rules):
        errors += _validate_rule(job, rule, rules.index(i), containers)
    return errors


def _validate_rule(
    job: Job, rule: PodFailurePolicyRule, path: FieldPath, containers: set[str | None]
) -> list[FieldError]:
    action = path.child("action")
    errors: list[FieldError] = []
    if not rule.action:
        errors.append(required(action, f"valid values: {_quoted(POD_FAILURE_ACTIONS)}"))
    elif rule.action == "FailIndex":
        if "backoffLimitPerIndex" not in (job.spec.model_extra or {}):
            errors.append(invalid(action, rule.action, "requires the backoffLimitPerIndex to be set"))
    elif rule.action not in POD_FAILURE_ACTIONS:
        errors.append(not_supported(action, rule.action, POD_FAILURE_ACTIONS))
    if rule.on_exit_codes is not None:
        errors += _validate_on_exit_codes(rule.on_exit_codes, path.child("onExitCodes"), containers)
    if rule.on_pod_conditions:
        errors += _validate_on_pod_conditions(rule.on_pod_conditions, path.child("onPodConditions"))
    if rule.on_exit_codes is not None and rule.on_pod_conditions:
        detail = "specifying both OnExitCodes and OnPodConditions is not supported"
        errors.append(invalid(path, OMITTED, detail))
    if rule.on_exit_codes is None and not rule.on_pod_conditions:
        errors.append(invalid(path, OMITTED, "specifying one of OnExitCodes and OnPodConditions is required"))
    return errors


def _validate_on_exit_codes(
    requirement: PodFailurePolicyOnExitCodesRequirement, path: FieldPath, containers: set[str | None]
) -> list[FieldError]:
    operator = path.child("operator")
    errors: list[FieldError] = []
    if not requirement.operator:
        errors.append(required(operator, f"valid values: {_quoted(EXIT_CODE_OPERATORS)}"))
    elif requirement.operator not in EXIT_CODE_OPERATORS:
        errors.append(not_supported(operator, requirement.operator, EXIT_CODE_OPERATORS))
    if requirement.container_name is not None and requirement.container_name not in containers:
        detail = "must be one of the container or initContainer names in the pod template"
        errors.append(invalid(path.child("containerName"), requirement.container_name, detail))
    values = path.child("values")
    codes = requirement.values
    if not codes:
        errors.append(invalid(values, codes, "at least one value is required"))
    elif len(codes) > MAX_EXIT_CODE_VALUES:
        errors.append(too_many(values, len(codes), MAX_EXIT_CODE_VALUES))
    seen: set[int] = set()
    for j, code in enumerate(codes):
        if requirement.operator == "In" and code == 0:
            errors.append(invalid(values.index(j), code, "must not be 0 for the In operator"))
        if code in seen:
            errors.append(duplicate(values.index(j), code))
        seen.add(code)
    if any(a > b for a, b in pairwise(codes)):
        errors.append(invalid(values, codes, "must be ordered"))
    return errors


def _validate_on_pod_conditions(
    patterns: list[PodFailurePolicyOnPodConditionsPattern], path: FieldPath
) -> list[FieldError]:
    errors: list[FieldError] = []
    if len(patterns) > MAX_CONDITION_PATTERNS:
        errors.append(too_many(path, len(patterns), MAX_CONDITION_PATTERNS))
    for j, pattern in enumerate(patterns):
        kind = path.index(j).child("type")
        if not pattern.type:
            errors.append(required(kind))
        else:
            errors += [invalid(kind, pattern.type, message) for message in label_key_errors(pattern.type)]
        status = path.index(j).child("status")
        if not pattern.status:
            errors.append(required(status, f"valid values: {_quoted(CONDITION_STATUSES)}"))
        elif pattern.status not in CONDITION_STATUSES:
            errors.append(not_supported(status, pattern.status, CONDITION_STATUSES))
    return errors


def _quoted(values: tuple[str, ...]) -> str:
    """Go's `%q` of a string slice: `["a" "b"]`."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


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
