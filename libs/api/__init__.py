"""Podway's API layer: the v1.36 resource models, defaulting, validation with field paths in the API
server's words, v1.35 conversion, priority resolution, Job expansion and CEL device selectors.

Pure: no I/O, safe to import from libs.core. The usual entry points are re-exported here."""

from libs.api.conversion import convert_documents
from libs.api.defaults import apply_defaults
from libs.api.device_selectors import compile_selector, evaluate_selector
from libs.api.errors import ErrorType, FieldError, FieldPath, format_invalid, to_status
from libs.api.jobs import JobExpansion, expand_job, is_gang_job, validate_job_update
from libs.api.kinds import KIND_ORDER, is_namespaced
from libs.api.manifests import (
    InvalidObjectError,
    ManifestError,
    ValidationResult,
    load_documents,
    object_key,
    parse_object,
    validate_document,
)
from libs.api.priority import resolve_priority
from libs.api.quantity import parse_quantity
from libs.api.validation import validate_object, validate_update

__all__ = [
    "KIND_ORDER",
    "ErrorType",
    "FieldError",
    "FieldPath",
    "InvalidObjectError",
    "JobExpansion",
    "ManifestError",
    "ValidationResult",
    "apply_defaults",
    "compile_selector",
    "convert_documents",
    "evaluate_selector",
    "expand_job",
    "format_invalid",
    "is_gang_job",
    "is_namespaced",
    "load_documents",
    "object_key",
    "parse_object",
    "parse_quantity",
    "resolve_priority",
    "to_status",
    "validate_document",
    "validate_job_update",
    "validate_object",
    "validate_update",
]
