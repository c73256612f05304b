"""`kueue.x-k8s.io/v1beta1` ResourceFlavor, ClusterQueue, LocalQueue and Cohort, converted to the version
Podway stores them in (v1beta2), as Kueue's `apis/kueue/v1beta1/*_conversion.go` convert them:

- ClusterQueue `spec.cohort` became `spec.cohortName`;
- ClusterQueue `spec.admissionChecks` (names) became `spec.admissionChecksStrategy.admissionChecks` (rules
  without `onFlavors`);
- `flavorFungibility` lost its deprecated values: `whenCanBorrow: Borrow` and `whenCanPreempt: Preempt` are
  `MayStopSearch`;
- LocalQueue `status.flavorUsage` became `status.flavorsUsage`.

v1beta1 is deprecated upstream; a document written in it is answered with upstream's warning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from libs.api.errors import FieldError
from libs.api.kinds import KUEUE_V1BETA2
from libs.api.models.kueue import MAY_STOP_SEARCH

Document = dict[str, Any]

DEPRECATED: Final = "This version is deprecated. Use v1beta2 instead."
"""The warning upstream's CRDs give for v1beta1 (`+kubebuilder:deprecatedversion:warning`)."""
_DEPRECATED_FUNGIBILITY: Final = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
SERVED_PATHS: Final = (("spec.cohortName", "spec.cohort"),)
"""Stored field paths → their v1beta1 names, for errors about a v1beta1 document."""


def from_kueue_v1beta1(doc: Document) -> tuple[Document, list[str]]:
    """A v1beta1 quota object (a copy of the caller's, changed in place) in the stored shape, and the
    deprecation warning. Values of the wrong JSON type are left where they are, for decoding to report."""
    kind = str(doc.get("kind"))
    doc["apiVersion"] = KUEUE_V1BETA2
    spec = doc.get("spec")
    if kind == "ClusterQueue" and isinstance(spec, dict):
        doc["spec"] = _cluster_queue_spec(spec)
    status = doc.get("status")
    if kind == "LocalQueue" and isinstance(status, dict) and "flavorUsage" in status:
        doc["status"] = {**status, "flavorsUsage": status["flavorUsage"]}
        del doc["status"]["flavorUsage"]
    return doc, [DEPRECATED]


def _cluster_queue_spec(spec: Document) -> Document:
    stored = dict(spec)
    if "cohort" in stored:
        stored["cohortName"] = stored.pop("cohort")
    checks = stored.pop("admissionChecks", None)
    if isinstance(checks, list) and checks and "admissionChecksStrategy" not in stored:
        stored["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
    fungibility = stored.get("flavorFungibility")
    if isinstance(fungibility, dict):
        stored["flavorFungibility"] = {
            key: MAY_STOP_SEARCH if _DEPRECATED_FUNGIBILITY.get(key) == value else value
            for key, value in fungibility.items()
        }
    return stored


def kueue_v1beta1_errors(errors: Sequence[FieldError]) -> tuple[FieldError, ...]:
    """Errors found in the stored shape of a v1beta1 document, named as v1beta1 names its fields (in the
    path, and in a schema error's detail, which repeats it)."""
    return tuple(_served_error(error) for error in errors)


def _served_error(error: FieldError) -> FieldError:
    for stored, served in SERVED_PATHS:
        if error.path == stored or error.path.startswith((stored + ".", stored + "[")):
            path = served + error.path[len(stored) :]
            return dataclasses.replace(error, path=path, detail=error.detail.replace(error.path, path))
    return error
