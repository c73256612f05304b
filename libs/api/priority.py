"""Priority admission: resolving `priorityClassName` to `priority` from the known PriorityClasses, as the
API server's Priority admission plugin does for pods, applied alike to PodGroups and Workload templates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Protocol, TypeVar

from libs.api.errors import FieldError, FieldPath, forbidden
from libs.api.models.batch import Job
from libs.api.models.core import Pod, PodSpec
from libs.api.models.meta import ApiObject, ObjectMeta
from libs.api.models.scheduling import (
    PREEMPT_LOWER_PRIORITY,
    SYSTEM_PRIORITY_CLASSES,
    CompositePodGroup,
    CompositePodGroupTemplate,
    PodGroup,
    PriorityClass,
    Workload,
    WorkloadSpec,
)

BUILTIN_PRIORITY_CLASSES: Final = {
    name: PriorityClass(metadata=ObjectMeta(name=name), value=value)
    for name, value in SYSTEM_PRIORITY_CLASSES.items()
}

SPEC: Final = FieldPath("spec")
Obj = TypeVar("Obj", bound=ApiObject)


@dataclass(frozen=True, slots=True)
class ResolvedPriority:
    """What a class name resolves to: the class actually used ("" for none), its value and policy."""

    class_name: str
    value: int
    preemption_policy: str


_NO_CLASS: Final = ResolvedPriority("", 0, PREEMPT_LOWER_PRIORITY)


class _PriorityHolder(Protocol):
    priority_class_name: str | None
    priority: int | None


def lookup_priority(class_name: str | None, classes: Mapping[str, PriorityClass]) -> ResolvedPriority | None:
    """The priority of a named class, or of the global default class (priority 0 without one) when no
    name is given; None when the named class does not exist."""
    if not class_name:
        return default_priority(classes)
    # A given class of a built-in name takes its place.
    priority_class = (
        classes[class_name] if class_name in classes else BUILTIN_PRIORITY_CLASSES.get(class_name)
    )
    if priority_class is None:
        return None
    return _resolved(class_name, priority_class)


def default_priority(classes: Mapping[str, PriorityClass]) -> ResolvedPriority:
    """The global default class (the lowest value if several claim it, as the API server picks), else 0."""
    defaults = [pc for pc in classes.values() if pc.global_default]
    if not defaults:
        return _NO_CLASS
    chosen = min(defaults, key=lambda pc: pc.value)
    return _resolved(chosen.name, chosen)


def _resolved(class_name: str, priority_class: PriorityClass) -> ResolvedPriority:
    return _resolved_priority(
        class_name, priority_class.value, priority_class.preemption_policy or PREEMPT_LOWER_PRIORITY
    )


@lru_cache(maxsize=1024, typed=True)
def _resolved_priority(class_name: str, value: int, preemption_policy: str) -> ResolvedPriority:
    # Shared instances (they are frozen): every pod of a class resolves to the same answer.
    return ResolvedPriority(class_name, value, preemption_policy)


def resolve_priority(obj: Obj, classes: Mapping[str, PriorityClass]) -> tuple[Obj, list[FieldError]]:
    """A copy with `priority` (and a pod's `preemptionPolicy`) set from its PriorityClass, and the errors:
    an unknown class name, or a user-set priority or preemption policy that disagrees with the class.

    Applies to Pods, PodGroups, each Workload template and a Job's pod template; other kinds come back
    unchanged. Without a class name, the global default class is used (priority 0 if there is none)."""
    copy = obj.model_copy(deep=True)
    return copy, resolve_priority_in_place(copy, classes)


def resolve_priority_in_place(obj: ApiObject, classes: Mapping[str, PriorityClass]) -> list[FieldError]:
    """resolve_priority without the copy: sets the priorities of `obj` itself and returns the errors. For an
    object the caller has just parsed and owns (admission). On errors `obj` may be partly resolved, as the
    copy resolve_priority returns may be."""
    errors: list[FieldError] = []
    if isinstance(obj, Pod):
        errors = _resolve_pod_spec(obj.spec, SPEC, classes)
    elif isinstance(obj, Job) and obj.spec.template is not None:
        errors = _resolve_pod_spec(obj.spec.template.spec, SPEC.child("template", "spec"), classes)
    elif isinstance(obj, PodGroup):
        errors = _resolve_holder(obj.spec, SPEC, classes, "PodGroup spec")[1]
    elif isinstance(obj, CompositePodGroup):
        errors = _resolve_holder(obj.spec, SPEC, classes, "CompositePodGroup spec")[1]
    elif isinstance(obj, Workload):
        errors = _resolve_templates(obj.spec, SPEC, classes)
    return errors


def _resolve_templates(
    level: WorkloadSpec | CompositePodGroupTemplate, path: FieldPath, classes: Mapping[str, PriorityClass]
) -> list[FieldError]:
    """Every template of a Workload's group tree, composite templates included."""
    errors: list[FieldError] = []
    templates = path.child("podGroupTemplates")
    for position, template in enumerate(level.pod_group_templates):
        errors += _resolve_holder(template, templates.index(position), classes, "Workload template")[1]
    composites = path.child("compositePodGroupTemplates")
    for position, composite in enumerate(level.composite_pod_group_templates):
        at = composites.index(position)
        errors += _resolve_holder(composite, at, classes, "Workload template")[1]
        errors += _resolve_templates(composite, at, classes)
    return errors


def _resolve_holder(
    holder: _PriorityHolder, path: FieldPath, classes: Mapping[str, PriorityClass], where: str
) -> tuple[ResolvedPriority | None, list[FieldError]]:
    resolved = lookup_priority(holder.priority_class_name, classes)
    if resolved is None:
        detail = f"no PriorityClass with name {holder.priority_class_name} was found"
        return None, [forbidden(path.child("priorityClassName"), detail)]
    if holder.priority is not None and holder.priority != resolved.value:
        detail = (
            f"the integer value of priority ({holder.priority}) must not be provided in {where}; "
            f"priority admission controller computed {resolved.value} from the given PriorityClass name"
        )
        return resolved, [forbidden(path.child("priority"), detail)]
    holder.priority_class_name = resolved.class_name or None
    holder.priority = resolved.value
    return resolved, []


def _resolve_pod_spec(
    spec: PodSpec, path: FieldPath, classes: Mapping[str, PriorityClass]
) -> list[FieldError]:
    resolved, errors = _resolve_holder(spec, path, classes, "pod spec")
    if resolved is None or errors:
        return errors
    if spec.preemption_policy is not None and spec.preemption_policy != resolved.preemption_policy:
        detail = (
            f"the string value of PreemptionPolicy ({spec.preemption_policy}) must not be provided in pod spec; "
            f"priority admission controller computed {resolved.preemption_policy} from the given PriorityClass name"
        )
        return [forbidden(path.child("preemptionPolicy"), detail)]
    spec.preemption_policy = resolved.preemption_policy
    return []
