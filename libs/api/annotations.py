"""Podway's own annotations (`podway.io/*`): their names, how they are validated, and typed readers.

They may sit on a PodGroup, on its Workload (applying to all its PodGroups) or on the Job that generated
them; `podway.io/run-seconds` sits on pods."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from libs.api.errors import FieldError, FieldPath, invalid, not_supported
from libs.api.formats import label_key_errors

PREFIX: Final = "podway.io/"
TOPOLOGY_KEY: Final = "podway.io/topology-key"
TOPOLOGY_PREFERRED: Final = "podway.io/topology-preferred"
MAX_PENDING_SECONDS: Final = "podway.io/max-pending-seconds"
GANG_RESTART: Final = "podway.io/gang-restart"
RUN_SECONDS: Final = "podway.io/run-seconds"
# A v1.35 pod's `spec.workloadRef` {name, podGroup, podGroupReplicaKey}, recorded when it is converted to
# `spec.schedulingGroup`: the pod waits for that Workload, and its PodGroup is created when the Workload is.
# On that PodGroup, WORKLOAD_REF_NAME names the Workload it was created for, and is deleted with.
WORKLOAD_REF_NAME: Final = "podway.io/workload-ref-name"
WORKLOAD_REF_POD_GROUP: Final = "podway.io/workload-ref-pod-group"
WORKLOAD_REF_REPLICA_KEY: Final = "podway.io/workload-ref-replica-key"

GANG_RESTART_ALWAYS: Final = "Always"
GANG_RESTART_NEVER: Final = "Never"
GANG_RESTART_VALUES: Final = (GANG_RESTART_ALWAYS, GANG_RESTART_NEVER)

KNOWN: Final = frozenset(
    {
        TOPOLOGY_KEY,
        TOPOLOGY_PREFERRED,
        MAX_PENDING_SECONDS,
        GANG_RESTART,
        RUN_SECONDS,
        WORKLOAD_REF_NAME,
        WORKLOAD_REF_POD_GROUP,
        WORKLOAD_REF_REPLICA_KEY,
    }
)
# Carried from a Job to the Workload and PodGroup it generates.
GANG_ANNOTATIONS: Final = (TOPOLOGY_KEY, TOPOLOGY_PREFERRED, MAX_PENDING_SECONDS, GANG_RESTART)


def validate_podway_annotations(annotations: Mapping[str, str], path: FieldPath) -> list[FieldError]:
    """Errors for malformed Podway annotations; `path` is the `metadata.annotations` path."""
    errors: list[FieldError] = []
    if not annotations:
        return errors
    for key, check in _CHECKS.items():
        if key in annotations:
            errors.extend(check(annotations[key], path.key(key)))
    return errors


def unknown_podway_annotations(annotations: Mapping[str, str]) -> list[str]:
    """Annotation keys under `podway.io/` that Podway does not know (likely typos), for warnings."""
    if not annotations:
        return []
    return sorted(key for key in annotations if key.startswith(PREFIX) and key not in KNOWN)


def _check_topology_key(value: str, path: FieldPath) -> list[FieldError]:
    return [invalid(path, value, message) for message in label_key_errors(value)]


def _check_topology_preferred(value: str, path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in value.split(","):
        errors.extend(invalid(path, key, message) for message in label_key_errors(key))
    return errors


def _check_max_pending_seconds(value: str, path: FieldPath) -> list[FieldError]:
    if value.isdecimal() and int(value) > 0:
        return []
    return [invalid(path, value, "must be a positive integer")]


def _check_gang_restart(value: str, path: FieldPath) -> list[FieldError]:
    return [] if value in GANG_RESTART_VALUES else [not_supported(path, value, GANG_RESTART_VALUES)]


def _check_run_seconds(value: str, path: FieldPath) -> list[FieldError]:
    return (
        []
        if _non_negative_number(value) is not None
        else [invalid(path, value, "must be a non-negative number")]
    )


def _non_negative_number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


_CHECKS: Final = {
    TOPOLOGY_KEY: _check_topology_key,
    TOPOLOGY_PREFERRED: _check_topology_preferred,
    MAX_PENDING_SECONDS: _check_max_pending_seconds,
    GANG_RESTART: _check_gang_restart,
    RUN_SECONDS: _check_run_seconds,
}


def effective_annotations(*layers: Mapping[str, str]) -> dict[str, str]:
    """The Podway annotations in force for a PodGroup, given its layers most specific first (PodGroup,
    Workload, Job): a key set on an earlier layer wins."""
    merged: dict[str, str] = {}
    for layer in reversed(layers):
        merged.update({key: value for key, value in layer.items() if key.startswith(PREFIX)})
    return merged


def topology_key(annotations: Mapping[str, str]) -> str | None:
    """The hard topology key a Job asks for (`podway.io/topology-key`)."""
    return annotations.get(TOPOLOGY_KEY) or None


def topology_preferred(annotations: Mapping[str, str]) -> list[str]:
    """Preferred topology levels, tightest first (`podway.io/topology-preferred`)."""
    value = annotations.get(TOPOLOGY_PREFERRED, "")
    return [key for key in value.split(",") if key]


def max_pending_seconds(annotations: Mapping[str, str]) -> int | None:
    """How long a gang may stay unschedulable before it fails, if bounded."""
    value = annotations.get(MAX_PENDING_SECONDS, "")
    return int(value) if value.isdecimal() and int(value) > 0 else None


def gang_restart(annotations: Mapping[str, str], *, job_owned: bool) -> str:
    """`Always` or `Never`; Job-owned gangs restart by default, others do not."""
    value = annotations.get(GANG_RESTART)
    if value in GANG_RESTART_VALUES:
        return value
    return GANG_RESTART_ALWAYS if job_owned else GANG_RESTART_NEVER


def run_seconds(annotations: Mapping[str, str]) -> float | None:
    """How long a simulated pod runs (`podway.io/run-seconds`), if set."""
    return _non_negative_number(annotations.get(RUN_SECONDS, ""))
