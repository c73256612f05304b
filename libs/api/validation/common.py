"""Small checks shared by the per-kind validators."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from libs.api.errors import FieldError, FieldPath, duplicate, immutable, invalid, not_supported, required
from libs.api.models.base import ApiModel

FormatCheck = Callable[[str], list[str]]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def check_required_format(value: str | None, path: FieldPath, check: FormatCheck) -> list[FieldError]:
    """A required string: `Required value` when empty, else one `Invalid value` per format message."""
    if not value:
        return [required(path)]
    return [invalid(path, value, message) for message in check(value)]


def check_optional_format(value: str | None, path: FieldPath, check: FormatCheck) -> list[FieldError]:
    """An optional string: nothing when unset, else one `Invalid value` per format message."""
    if not value:
        return []
    return [invalid(path, value, message) for message in check(value)]


def check_enum(value: str | None, path: FieldPath, supported: Sequence[str]) -> list[FieldError]:
    """An optional enumeration: `Unsupported value` when set to something outside `supported`."""
    if value is None or value in supported:
        return []
    return [not_supported(path, value, supported)]


def check_minimum(value: int | None, path: FieldPath, minimum: int) -> list[FieldError]:
    """An optional integer with a lower bound, worded as `content.MinError`."""
    if value is None or value >= minimum:
        return []
    return [invalid(path, value, f"must be greater than or equal to {minimum}")]


def check_unique_names(names: Sequence[str | None], path: FieldPath) -> list[FieldError]:
    """`Duplicate value` at `<path>[i].name` for every name seen before in the list."""
    seen: set[str] = set()
    errors: list[FieldError] = []
    for position, name in enumerate(names):
        if name is None:
            continue
        if name in seen:
            errors.append(duplicate(path.index(position).child("name"), name))
        seen.add(name)
    return errors


def check_item_name(
    name: str | None, path: FieldPath, seen: set[str], check: FormatCheck
) -> list[FieldError]:
    """`<path>.name` of one list item: required, well-formed and not seen before; records it in `seen`."""
    errors = check_required_format(name, path.child("name"), check)
    if name:
        if name in seen:
            errors.append(duplicate(path.child("name"), name))
        seen.add(name)
    return errors


def check_unchanged(old: Any, new: Any, path: FieldPath) -> list[FieldError]:
    """`Invalid value: <new>: field is immutable` when an update changed the value (compared on the wire)."""
    old_wire, new_wire = _wire(old), _wire(new)
    return [] if old_wire == new_wire else [immutable(path, new_wire)]


def _wire(value: Any) -> Any:
    if isinstance(value, ApiModel):
        return value.to_wire()
    if isinstance(value, list):
        return [_wire(item) for item in value]
    return value
