"""Field errors worded as the Kubernetes API server words them, and the two ways they are answered:
the kubectl-style text (`The Workload "x" is invalid:` then one `* path: error` line each) and a
Kubernetes `Status` object for `-o json`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypeVar

from libs.api.kinds import group_of_kind


class ErrorType(StrEnum):
    """The error types of k8s.io/apimachinery `field.ErrorType`; the value is the Status cause reason."""

    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    DUPLICATE = "FieldValueDuplicate"
    TOO_MANY = "FieldValueTooMany"
    TOO_LONG = "FieldValueTooLong"
    FORBIDDEN = "FieldValueForbidden"
    NOT_FOUND = "FieldValueNotFound"

    @property
    def label(self) -> str:
        """How the type reads in an error line, e.g. `Required value`."""
        return _LABELS[self]


_LABELS: Final[dict[ErrorType, str]] = {
    ErrorType.REQUIRED: "Required value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.NOT_FOUND: "Not found",
}

# Types whose line never shows the offending value, as in `field.Error.ErrorBody`.
_VALUE_HIDDEN: Final = frozenset({ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG})

FIELD_IMMUTABLE: Final = "field is immutable"


class _Omitted:
    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()
"""Marks an error that carries no value (the line then has none, like Go's `omitValue`)."""


@dataclass(frozen=True, slots=True)
class FieldPath:
    """A field path as the API server prints it: `spec.podGroupTemplates[0].name`, `metadata.labels[app]`."""

    text: str = ""

    # Validation builds the same few dozen paths for every object (`spec.containers[0].image`), and
    # paths are immutable: child, index and key hand out shared instances from small caches.

    def child(self, *names: str) -> FieldPath:
        """The path of a nested field."""
        path = self
        for name in names:
            text = path.text
            found = _CHILDREN.get((text, name))
            if found is None:
                shown = printable(name)
                found = _remember(_CHILDREN, (text, name), FieldPath(f"{text}.{shown}" if text else shown))
            path = found
        return path

    def index(self, position: int) -> FieldPath:
        """The path of one list item."""
        if type(position) is not int:  # True == 1 but reads "[True]": only plain ints are cached
            return FieldPath(f"{self.text}[{position}]")
        found = _INDEXES.get((self.text, position))
        if found is None:
            found = _remember(_INDEXES, (self.text, position), FieldPath(f"{self.text}[{position}]"))
        return found

    def key(self, key: str) -> FieldPath:
        """The path of one map entry."""
        if type(key) is not str:  # only plain strings are cached (1 == 1.0 but they read differently)
            return FieldPath(f"{self.text}[{printable(str(key))}]")
        found = _KEYS.get((self.text, key))
        if found is None:
            found = _remember(_KEYS, (self.text, key), FieldPath(f"{self.text}[{printable(key)}]"))
        return found

    def __str__(self) -> str:
        return self.text


ROOT: Final = FieldPath()

_PATH_CACHE_SIZE: Final = 8192
_Key = TypeVar("_Key")
_CHILDREN: Final[dict[tuple[str, str], FieldPath]] = {}
_INDEXES: Final[dict[tuple[str, int], FieldPath]] = {}
_KEYS: Final[dict[tuple[str, str], FieldPath]] = {}


def _remember(cache: dict[_Key, FieldPath], key: _Key, path: FieldPath) -> FieldPath:
    if len(cache) >= _PATH_CACHE_SIZE:  # map keys come from users: keep the caches bounded
        cache.clear()
    cache[key] = path
    return path


@dataclass(frozen=True, slots=True)
class FieldError:
    """One validation error: its type, the field path, the offending value and a detail."""

    type: ErrorType
    path: str
    value: Any = OMITTED
    detail: str = ""

    def body(self) -> str:
        """The error without its path, e.g. `Invalid value: -3: must be greater than or equal to 1`."""
        text = self.type.label
        if self.type not in _VALUE_HIDDEN and self.value is not OMITTED:
            text = f"{text}: {render_value(self.value)}"
        if not self.detail:
            return text
        # A CEL error echoes its input: each of its lines made printable, the line breaks kept.
        detail = "\n".join(printable(line) for line in self.detail.split("\n"))
        return f"{text}: {detail}"

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"


def render_value(value: Any) -> str:
    """A value the way the API server prints it: strings quoted, numbers bare, objects as compact JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return printable(json.dumps(value, ensure_ascii=False))
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    except TypeError:  # keys of mixed types (YAML allows `{0: x, a: y}`) cannot be sorted
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return printable(text)


def printable(text: str) -> str:
    """`text` with every character a terminal would act on (controls, bidi overrides, lone surrogates)
    escaped as `\\uXXXX`, so an error line cannot rewrite the user's screen or hide part of itself."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def required(path: FieldPath, detail: str = "") -> FieldError:
    """A missing required field."""
    return FieldError(ErrorType.REQUIRED, str(path), OMITTED, detail)


def invalid(path: FieldPath, value: Any, detail: str) -> FieldError:
    """A value that is present but wrong."""
    return FieldError(ErrorType.INVALID, str(path), value, detail)


def not_supported(path: FieldPath, value: Any, supported: Sequence[str]) -> FieldError:
    """A value outside an enumeration; the detail lists the supported values, quoted."""
    detail = "supported values: " + ", ".join(json.dumps(item) for item in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, str(path), value, detail)


def duplicate(path: FieldPath, value: Any) -> FieldError:
    """A value that must be unique within its list."""
    return FieldError(ErrorType.DUPLICATE, str(path), value)


def too_many(path: FieldPath, actual: int, maximum: int) -> FieldError:
    """A list with more items than allowed."""
    unit = "item" if maximum == 1 else "items"
    return FieldError(ErrorType.TOO_MANY, str(path), actual, f"must have at most {maximum} {unit}")


def too_long(path: FieldPath, maximum: int) -> FieldError:
    """A string longer than allowed."""
    unit = "byte" if maximum == 1 else "bytes"
    return FieldError(ErrorType.TOO_LONG, str(path), OMITTED, f"may not be more than {maximum} {unit}")


def forbidden(path: FieldPath, detail: str) -> FieldError:
    """A field that may not be set, or not changed, in this situation."""
    return FieldError(ErrorType.FORBIDDEN, str(path), OMITTED, detail)


def not_found(path: FieldPath, value: Any, detail: str = "") -> FieldError:
    """A reference to something that does not exist."""
    return FieldError(ErrorType.NOT_FOUND, str(path), value, detail)


def immutable(path: FieldPath, new_value: Any) -> FieldError:
    """An update that changed an immutable field (`apimachinery ValidateImmutableField`)."""
    return invalid(path, new_value, FIELD_IMMUTABLE)


def format_invalid(kind: str, name: str, errors: Iterable[FieldError]) -> str:
    """The text `podway apply` / `podway validate` prints for a rejected object, one error per line."""
    lines = [f'The {printable(kind)} "{printable(name)}" is invalid:']
    lines.extend(f"* {error}" for error in errors)
    return "\n".join(lines)


def status_message(kind: str, name: str, errors: Sequence[FieldError]) -> str:
    """The Status message of `apierrors.NewInvalid`: `Kind.group "name" is invalid: [e1, e2]`."""
    group = group_of_kind(kind)
    qualified = f"{kind}.{group}" if group else kind
    messages = list(dict.fromkeys(str(error) for error in errors))
    if not messages:
        return f'{printable(qualified)} "{printable(name)}" is invalid'
    joined = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    return f'{printable(qualified)} "{printable(name)}" is invalid: {joined}'


def to_status(kind: str, name: str, errors: Sequence[FieldError]) -> dict[str, Any]:
    """The Kubernetes `Status` (reason Invalid, code 422) answering a rejected object with `-o json`."""
    details: dict[str, Any] = {"name": name}
    group = group_of_kind(kind)
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [
        {"reason": error.type.value, "message": error.body(), "field": error.path} for error in errors
    ]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": status_message(kind, name, errors),
        "reason": "Invalid",
        "details": details,
        "code": 422,
    }


def resource_name(kind: str) -> str:
    """How the API server names a kind's resource in its messages: `jobs`, `podgroups`."""
    return f"{kind.lower()}s"


def being_deleted_message(kind: str, name: str) -> str:
    """The API server's answer to a create whose name is still held by an object being deleted."""
    return f'object is being deleted: {resource_name(kind)} "{name}" already exists'


def already_exists_status(kind: str, name: str, message: str) -> dict[str, Any]:
    """A `Status` (reason AlreadyExists, code 409) for a create whose name is taken."""
    details: dict[str, Any] = {"name": name}
    group = group_of_kind(kind)
    if group:
        details["group"] = group
    details["kind"] = resource_name(kind)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "AlreadyExists",
        "details": details,
        "code": 409,
    }


def namespace_terminating_status(kind: str, name: str, namespace: str) -> dict[str, Any]:
    """A `Status` (reason Forbidden, code 403) for a create in a namespace being deleted, as upstream's
    NamespaceLifecycle admission answers it."""
    detail = f"unable to create new content in namespace {namespace} because it is being terminated"
    details: dict[str, Any] = {"name": name, "kind": resource_name(kind)}
    group = group_of_kind(kind)
    if group:
        details["group"] = group
    details["causes"] = [{"reason": "NamespaceTerminating", "message": detail, "field": namespace}]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{qualified_resource(kind)} "{name}" is forbidden: {detail}',
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def qualified_resource(kind: str) -> str:
    """A kind's resource as the API server qualifies it in messages: `pods`, `jobs.batch`,
    `podgroups.scheduling.k8s.io`."""
    group = group_of_kind(kind)
    return f"{resource_name(kind)}.{group}" if group else resource_name(kind)


def conflict_status(kind: str, name: str, detail: str) -> dict[str, Any]:
    """A `Status` (reason Conflict, code 409) for a write whose object changed since it was read:
    `Operation cannot be fulfilled on pods "x": the object has been modified; ...`."""
    details: dict[str, Any] = {"name": name, "kind": resource_name(kind)}
    group = group_of_kind(kind)
    if group:
        details["group"] = group
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Operation cannot be fulfilled on {qualified_resource(kind)} "{name}": {detail}',
        "reason": "Conflict",
        "details": details,
        "code": 409,
    }


def internal_error_status(message: str) -> dict[str, Any]:
    """A `Status` (reason InternalError, code 500) for a request the server failed to carry out."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "code": 500,
    }


def bad_request_status(message: str) -> dict[str, Any]:
    """A `Status` for a document that is not an object Podway can read at all (code 400)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "BadRequest",
        "code": 400,
    }
