"""Base models and field types shared by every Podway resource model.

Models are lenient about values (an out-of-range `minCount` or an unknown enum value parses, so that
validation can report it in the API server's words) and strict about JSON types (a string where an
integer belongs is a decoding error, as on the API server). Unknown fields are kept, never dropped; the
fields a model declares, with its PASSED_THROUGH ones, are the known fields of its part of the schema."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import UnionType
from typing import Annotated, Any, ClassVar, Final, Union, get_args, get_origin

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

PODWAY_STATUS: Final = "podway"
"""The status block where Podway's controllers record what upstream has no field for (the node a pod ran
on, a PodGroup's derived phase, when a claim's allocation was proposed)."""

NONE_TO_LIST = BeforeValidator(_none_to_list)
"""Put on `list[...]` fields so that an explicit `null` reads as an empty list."""

NONE_TO_DICT = BeforeValidator(_none_to_dict)
"""Put on `dict[...]` fields so that an explicit `null` reads as an empty map."""


class ApiModel(BaseModel):
    """A part of a resource: the fields it declares are what Podway reads; any other field is unknown,
    unless the part names it in PASSED_THROUGH."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
        strict=True,
        serialize_by_alias=True,
    )

    PASSED_THROUGH: ClassVar[frozenset[str]] = frozenset()
    """Fields of the upstream (v1.36) type that Podway carries without reading, in their wire spelling, and
    the Podway-only status blocks its controllers write (see PODWAY_STATUS), which `get` shows."""

    def to_wire(self) -> dict[str, Any]:
        """The camelCase JSON-ready dict, leaving out nulls and empty defaults as Go's `omitempty` does."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)


class PassThroughModel(ApiModel):
    """A part of a resource Podway reads only partly (containers, Job spec): the upstream fields it does not
    read are listed in PASSED_THROUGH and ride along unchecked below their name."""


def unknown_fields(model: ApiModel, path: str = "") -> list[str]:
    """Paths of fields that are neither declared nor passed through by their part, in model order, e.g.
    `spec.paralelism` or `spec.podGroupTemplates[0].minCont`: what the API server calls `unknown field`.

    Only fields whose type can hold a model somewhere below are visited (see _walk_plan), so strings,
    numbers and maps of strings cost nothing; the values of passed-through fields are not looked into."""
    found: list[str] = []
    _collect_unknown(model, path, found)
    return found


def _collect_unknown(model: ApiModel, path: str, found: list[str]) -> None:
    passed, fields = _PLANS.get(type(model)) or _walk_plan(type(model))
    extra = model.__pydantic_extra__
    if extra:
        found += [f"{path}.{key}" if path else key for key in extra if key not in passed]
    for name, alias, shape in fields:
        value = getattr(model, name)
        if value is None:
            continue
        if shape is _MODEL and isinstance(value, ApiModel):
            _collect_unknown(value, f"{path}.{alias}" if path else alias, found)
        elif shape is _MODEL_LIST and type(value) is list:
            if value:
                at = f"{path}.{alias}" if path else alias
                for position, element in enumerate(value):
                    if isinstance(element, ApiModel):
                        _collect_unknown(element, f"{at}[{position}]", found)
                    else:
                        _collect_in(element, f"{at}[{position}]", found)
        else:
            _collect_in(value, f"{path}.{alias}" if path else alias, found)


def drop_unknown_fields(model: ApiModel) -> None:
    """Take out every field `unknown_fields` finds, as the API server drops what it does not know from an
    object it takes with `fieldValidation=Warn|Ignore` (it is never stored)."""
    _visit_unknown(model, _drop_extra)


def _drop_extra(model: ApiModel, passed: frozenset[str]) -> None:
    extra = model.__pydantic_extra__
    if extra:
        for key in [key for key in extra if key not in passed]:
            del extra[key]


def _visit_unknown(value: Any, visit: Callable[[ApiModel, frozenset[str]], None]) -> None:
    # The parts unknown_fields looks into, each model given with the fields it passes through.
    if isinstance(value, ApiModel):
        passed, fields = _PLANS.get(type(value)) or _walk_plan(type(value))
        visit(value, passed)
        for name, _, _ in fields:
            if (inner := getattr(value, name)) is not None:
                _visit_unknown(inner, visit)
    elif isinstance(value, list):
        for element in value:
            _visit_unknown(element, visit)
    elif isinstance(value, dict):
        for element in value.values():
            _visit_unknown(element, visit)


def _collect_in(value: Any, path: str, found: list[str]) -> None:
    # Any value: models are looked into wherever they sit in lists and maps.
    if isinstance(value, ApiModel):
        _collect_unknown(value, path, found)
    elif isinstance(value, list):
        for position, element in enumerate(value):
            _collect_in(element, f"{path}[{position}]", found)
    elif isinstance(value, dict):
        for key, element in value.items():
            _collect_in(element, f"{path}[{key}]", found)


# How unknown_fields looks into a field's value: a model, a list of models, or anything (walked generically).
_MODEL: Final = "model"
_MODEL_LIST: Final = "model list"
_ANY: Final = "any"
_FieldPlan = tuple[str, str, str]
# Per model class: the fields it passes through, and the fields to look into, in order.
_PLANS: dict[type[ApiModel], tuple[frozenset[str], tuple[_FieldPlan, ...]]] = {}
_SCALARS: Final = (str, int, float, bytes, type(None))


def _walk_plan(model: type[ApiModel]) -> tuple[frozenset[str], tuple[_FieldPlan, ...]]:
    fields = tuple(
        (name, info.alias or name, _shape(info.annotation))
        for name, info in model.model_fields.items()
        if _may_hold_models(info.annotation)
    )
    plan = (model.PASSED_THROUGH, fields)
    _PLANS[model] = plan
    return plan


def _shape(annotation: Any) -> str:
    if _model_class(annotation) is not None:
        return _MODEL
    if get_origin(annotation) is list and _model_class(get_args(annotation)[0]) is not None:
        return _MODEL_LIST
    return _ANY


def _model_class(annotation: Any) -> type[ApiModel] | None:
    # `M` or `M | None`.
    if get_origin(annotation) in (Union, UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    if isinstance(annotation, type) and not get_args(annotation) and issubclass(annotation, ApiModel):
        return annotation
    return None


def _may_hold_models(annotation: Any) -> bool:
    """Whether a value of this type can contain a model (which may have unknown fields); True whenever the
    type is not fully understood (Any, a forward reference, ...), so that nothing is ever missed."""
    if isinstance(annotation, type) and not get_args(annotation):
        return issubclass(annotation, ApiModel) or not issubclass(annotation, _SCALARS)
    origin = get_origin(annotation)
    if origin is Annotated:
        return _may_hold_models(get_args(annotation)[0])
    if origin in (list, dict, tuple, set, frozenset, Union, UnionType):
        return any(_may_hold_models(arg) for arg in get_args(annotation) if arg is not Ellipsis)
    return True
