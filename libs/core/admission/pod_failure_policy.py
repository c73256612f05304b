"""A Job's `podFailurePolicy`: what a failed pod means for the Job, as upstream's Job controller reads it.

Rules are tried in order and the first that matches decides: `FailJob` fails the Job (reason
`PodFailurePolicy`, with upstream's message), `Ignore` does not count the failure toward backoffLimit (the
pod is replaced), `Count` counts it, `FailIndex` fails the pod's index for good (it is not run again). A
rule matches on the exit code of a terminated container (init containers too; exit code 0 never matches)
or on a condition of the pod. A failure no rule matches is handled as without a policy: counted, unless the
pod was evicted (Podway's default: an eviction is not the workload's failure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from libs.core.admission.model import Manifest

FAIL_JOB: Final = "FailJob"
FAIL_INDEX: Final = "FailIndex"
IGNORE: Final = "Ignore"
COUNT: Final = "Count"
REASON: Final = "PodFailurePolicy"
"""The reason of the `Failed` condition a `FailJob` rule sets."""


@dataclass(frozen=True)
class RuleMatch:
    """The action of the first rule a failed pod matched, and for `FailJob` the Job's failure message."""

    action: str
    message: str = ""


def match_failure(policy: Manifest | None, pod: Manifest) -> RuleMatch | None:
    """The first rule of `policy` (a Job's `spec.podFailurePolicy`) that failed `pod` matches, if any."""
    for index, rule in enumerate((policy or {}).get("rules") or []):
        action = str(rule.get("action") or "")
        found = _match(rule, pod)
        if found is not None:
            return RuleMatch(action, _message(found, rule, index, pod) if action == FAIL_JOB else "")
    return None


def _match(rule: Manifest, pod: Manifest) -> tuple[str, Any] | None:
    status = pod.get("status") or {}
    if rule.get("onExitCodes") is not None:
        requirement = rule["onExitCodes"]
        for container in [
            *(status.get("containerStatuses") or []),
            *(status.get("initContainerStatuses") or []),
        ]:
            code = ((container.get("state") or {}).get("terminated") or {}).get("exitCode")
            if code is None or code == 0:
                continue
            wanted = requirement.get("containerName")
            if (wanted is None or wanted == container.get("name")) and _operator_matches(code, requirement):
                return ("exit", (container.get("name"), code))
        return None
    patterns = rule.get("onPodConditions") or []
    for condition in status.get("conditions") or []:
        for pattern in patterns:
            if condition.get("type") == pattern.get("type") and condition.get("status") == (
                pattern.get("status") or "True"
            ):
                return ("condition", condition.get("type"))
    return None


def _operator_matches(code: int, requirement: Manifest) -> bool:
    values = requirement.get("values") or []
    operator = requirement.get("operator")
    if operator == "In":
        return code in values
    if operator == "NotIn":
        return code not in values
    return False


def _message(found: tuple[str, Any], rule: Manifest, index: int, pod: Manifest) -> str:
    meta = pod.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    kind, detail = found
    action = rule.get("action")
    if kind == "exit":
        name, code = detail
        return f"Container {name} for pod {where} failed with exit code {code} matching {action} rule at index {index}"
    return f"Pod {where} has condition {detail} matching {action} rule at index {index}"
