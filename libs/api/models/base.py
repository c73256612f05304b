"""Base models and field types shared by every Podway resource model.

Models are lenient about values (an out-of-range `minCount` or an unknown enum value parses, so that
validation can report it in the API server's words) and strict about JSON types (a string where an
integer belongs is a decoding error, as on the API server). Unknown fields are kept, never dropped."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel


def _none_to_list(value: Any) -> Any:
    return [] if value is None else value


def _none_to_dict(value: Any) -> Any:
    return {} if value is None else value


def _scalar_to_str(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _string_values(value: Any) -> Any:
    # Unquoted YAML numbers in labels/annotations (`podway.io/run-seconds: 30`) are taken as strings.
    if isinstance(value, dict):
        return {key: _scalar_to_str(item) for key, item in value.items()}
    return _none_to_dict(value)


def _timestamp_to_str(value: Any) -> Any:
    # YAML turns an unquoted RFC 3339 timestamp into a datetime; the wire form is a string.
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def _quantity_to_str(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


StrMap = Annotated[dict[str, str], BeforeValidator(_string_values)]
"""A `map[string]string` (labels, annotations, nodeSelector); null reads as empty."""

Quantity = Annotated[str, BeforeValidator(_quantity_to_str)]
"""A resource quantity kept in its wire form; see libs.api.quantity for its value."""

QuantityMap = Annotated[dict[str, Quantity], BeforeValidator(_none_to_dict)]
"""A resource list (`requests`, `limits`, `allocatable`); null reads as empty."""

Timestamp = Annotated[str, BeforeValidator(_timestamp_to_str)]
"""An RFC 3339 time in its wire form."""

NONE_TO_LIST = BeforeValidator(_none_to_list)
"""Put on `list[...]` fields so that an explicit `null` reads as an empty list."""

NONE_TO_DICT = BeforeValidator(_none_to_dict)
"""Put on `dict[...]` fields so that an explicit `null` reads as an empty map."""


class ApiModel(BaseModel):
    """A part of a resource Podway models completely: unknown fields are kept but reported as warnings."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
        strict=True,
        serialize_by_alias=True,
    )

    WARN_UNKNOWN_FIELDS: ClassVar[bool] = True

    def to_wire(self) -> dict[str, Any]:
        """The camelCase JSON-ready dict, leaving out nulls and empty defaults as Go's `omitempty` does."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)


class PassThroughModel(ApiModel):
    """A part of a resource Podway reads only partly (containers, Job spec): other fields ride along silently."""

    WARN_UNKNOWN_FIELDS: ClassVar[bool] = False


def unknown_fields(model: ApiModel, path: str = "") -> list[str]:
    """Paths of fields Podway does not know inside fully modelled parts (pass-through parts excluded),
    e.g. `spec.podGroupTemplates[0].minCont`, for `unknown field` warnings."""
    found: list[str] = []
    if model.WARN_UNKNOWN_FIELDS and model.model_extra:
        found += [_join(path, key) for key in model.model_extra]
    for name, info in type(model).model_fields.items():
        found += _unknown_in(getattr(model, name), _join(path, info.alias or name))
    return found


def _unknown_in(value: Any, path: str) -> list[str]:
    if isinstance(value, ApiModel):
        return unknown_fields(value, path)
    if isinstance(value, list):
        return [
            item
            for position, element in enumerate(value)
            for item in _unknown_in(element, f"{path}[{position}]")
        ]
    if isinstance(value, dict):
        return [item for key, element in value.items() for item in _unknown_in(element, f"{path}[{key}]")]
    return []


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
