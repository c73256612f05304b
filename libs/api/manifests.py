"""Reading manifests: multi-document YAML to dicts, dicts to typed objects, and the whole admission check
of one document (conversion, decoding, defaulting, priority, validation) in one call."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import yaml
from pydantic import ValidationError

from libs.api.annotations import unknown_podway_annotations
from libs.api.conversion import convert_document
from libs.api.defaults import apply_defaults, apply_defaults_in_place
from libs.api.errors import (
    FieldError,
    FieldPath,
    bad_request_status,
    format_invalid,
    invalid,
    to_status,
)
from libs.api.fields_v1 import from_fields_v1, to_fields_v1, value_at
from libs.api.kinds import KIND_ORDER, NAMESPACED_KINDS, is_namespaced, kind_rank
from libs.api.limits import LimitExceeded, check_document_shape, check_request_size
from libs.api.models.base import drop_unknown_fields, unknown_fields
from libs.api.models.batch import Job
from libs.api.models.core import Namespace, Node, Pod
from libs.api.models.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from libs.api.models.meta import ApiObject
from libs.api.models.resource import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from libs.api.models.scheduling import CompositePodGroup, PodGroup, PriorityClass, Workload
from libs.api.priority import resolve_priority_in_place
from libs.api.validation import validate_object, validate_update

__all__ = [
    "KIND_ORDER",
    "MODELS",
    "NAMESPACED_KINDS",
    "FieldValidation",
    "InvalidObjectError",
    "ManifestError",
    "ValidationResult",
    "decode_manifest",
    "is_namespaced",
    "load_documents",
    "model_for",
    "object_key",
    "parse_object",
    "sort_for_apply",
    "to_manifest",
    "validate_document",
]

MODELS: Final[dict[tuple[str, str], type[ApiObject]]] = {
    (model.API_VERSION, model.KIND): model
    for model in (
        Namespace,
        PriorityClass,
        DeviceClass,
        Node,
        ResourceSlice,
        ResourceFlavor,
        Cohort,
        ClusterQueue,
        LocalQueue,
        Workload,
        CompositePodGroup,
        ResourceClaimTemplate,
        ResourceClaim,
        PodGroup,
        Job,
        Pod,
    )
}

FieldValidation = Literal["Strict", "Warn", "Ignore"]
"""What admission does with unknown fields, as the API server's `fieldValidation`: refuse the object,
admit it without them with a warning per field, or admit it without them silently."""

_TYPE_DETAILS: Final = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}


class ManifestError(ValueError):
    """A document that is not an object Podway can read: not YAML, not a mapping, kind or apiVersion
    missing or unknown. The message is worded as kubectl / the API server word it."""

    def status(self) -> dict[str, Any]:
        """The Kubernetes Status answering the document (reason BadRequest, code 400)."""
        return bad_request_status(str(self))


class InvalidObjectError(ValueError):
    """An object whose fields do not decode (a string where an integer belongs, ...)."""

    def __init__(self, kind: str, name: str, errors: Sequence[FieldError]) -> None:
        super().__init__(format_invalid(kind, name, errors))
        self.kind = kind
        self.name = name
        self.errors = list(errors)

    def status(self) -> dict[str, Any]:
        """The Kubernetes Status answering the object (reason Invalid, code 422)."""
        return to_status(self.kind, self.name, self.errors)


def decode_manifest(data: bytes) -> str:
    """The text of a manifest file. Raises ManifestError naming the byte offset of the first byte that is not
    UTF-8 (the only encoding a manifest may have), e.g. `invalid UTF-8 at byte 123`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ManifestError(f"invalid UTF-8 at byte {error.start}") from error


class _ManifestLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key set twice in one mapping is recorded, for the document to be refused
    as kubectl refuses it (PyYAML would keep the last value silently)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[int, str]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                self.duplicates.append((key_node.start_mark.line + 1, key_node.value))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _parse_documents(text: str) -> list[Any]:
    loader = _ManifestLoader(text)
    documents: list[Any] = []
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            documents.append(loader.get_data())
            if loader.duplicates:
                lines = "\n".join(
                    f'  line {line}: key "{key}" already set in map'
                    for line, key in sorted(loader.duplicates)
                )
                raise ManifestError(f"error converting YAML to JSON: yaml: unmarshal errors:\n{lines}")
    finally:
        loader.dispose()
    return documents


def load_documents(text: str) -> list[dict[str, Any]]:
    """The documents of a multi-document YAML (or JSON) text; empty documents are skipped and `kind: List`
    documents are expanded into their items. Raises ManifestError for bad YAML (a key set twice in a mapping
    included), a non-mapping document or a text over the limits of libs/api/limits.py."""
    try:
        check_request_size(text)
        raw_documents = _parse_documents(text)
    except LimitExceeded as error:
        raise ManifestError(str(error)) from error
    except yaml.YAMLError as error:
        raise ManifestError(f"error converting YAML to JSON: yaml: {error}") from error
    except RecursionError as error:  # the YAML composer recurses once per nesting level
        raise ManifestError(
            f"error converting YAML to JSON: yaml: nested deeper than the parser allows ({error})"
        ) from error
    documents: list[dict[str, Any]] = []
    for position, raw in enumerate(raw_documents):
        if raw is None:
            continue
        try:
            check_document_shape(raw, position)
        except LimitExceeded as error:
            raise ManifestError(str(error)) from error
        if not isinstance(raw, dict):
            raise ManifestError(
                f"document {position + 1} is not an object: {json.dumps(raw, default=str)[:200]}"
            )
        documents.extend(_expand_list(raw))
    return documents


def _expand_list(doc: dict[str, Any]) -> list[dict[str, Any]]:
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        return [item for item in doc["items"] if isinstance(item, dict)]
    return [doc]


def model_for(api_version: Any, kind: Any, doc: Mapping[str, Any] | None = None) -> type[ApiObject]:
    """The model of an apiVersion and kind. Raises ManifestError: `Object 'Kind' is missing in '...'`
    or `no matches for kind "X" in version "Y"`."""
    if not kind:
        raise ManifestError(f"Object 'Kind' is missing in '{_shown(doc)}'")
    if not api_version:
        raise ManifestError(f"Object 'apiVersion' is missing in '{_shown(doc)}'")
    model = MODELS.get((str(api_version), str(kind)))
    if model is None:
        raise ManifestError(f'no matches for kind "{kind}" in version "{api_version}"')
    return model


def _shown(doc: Mapping[str, Any] | None) -> str:
    return json.dumps(doc, default=str, separators=(",", ":")) if doc is not None else "{}"


def parse_object(doc: Mapping[str, Any]) -> ApiObject:
    """The typed object of a v1.36 document (convert v1.35 ones first). Raises ManifestError for an
    unknown or missing kind and InvalidObjectError when fields have the wrong JSON type."""
    model = model_for(doc.get("apiVersion"), doc.get("kind"), doc)
    try:
        return model.model_validate(doc)
    except ValidationError as error:
        raise InvalidObjectError(model.KIND, _document_name(doc), _decoding_errors(error)) from error


def _document_name(doc: Mapping[str, Any]) -> str:
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""


def _decoding_errors(error: ValidationError) -> list[FieldError]:
    errors = []
    for item in error.errors():
        path = FieldPath()
        for part in item["loc"]:
            path = path.index(part) if isinstance(part, int) else path.child(str(part))
        detail = _TYPE_DETAILS.get(item["type"], item["msg"])
        errors.append(invalid(path, item.get("input"), detail))
    return errors


def object_key(obj: ApiObject) -> tuple[str, str | None, str]:
    """(kind, namespace, name): how an object is identified; namespace is None for cluster-scoped kinds."""
    kind = obj.kind or obj.KIND
    return kind, obj.namespace if is_namespaced(kind) else None, obj.name


def to_manifest(obj: ApiObject) -> dict[str, Any]:
    """The wire form of an object (camelCase, nulls and empty defaults left out)."""
    return obj.to_wire()


def sort_for_apply(objects: Iterable[ApiObject]) -> list[ApiObject]:
    """Objects in KIND_ORDER (dependencies first), keeping the input order within a kind."""
    return sorted(objects, key=lambda obj: kind_rank(obj.kind or obj.KIND))


@dataclass(frozen=True)
class ValidationResult:
    """The answer to one document: the admitted object (None when rejected), the field errors, the
    warnings, and, when the document could not be read as an object at all, the problem."""

    obj: ApiObject | None
    errors: tuple[FieldError, ...] = ()
    warnings: tuple[str, ...] = ()
    kind: str = ""
    name: str = ""
    namespace: str | None = None
    problem: str | None = None
    status_code: int = 200

    @property
    def ok(self) -> bool:
        """Whether the document is admitted."""
        return self.obj is not None

    @property
    def message(self) -> str:
        """What kubectl would print for a rejection; "" when admitted."""
        if self.problem is not None:
            return self.problem
        return format_invalid(self.kind, self.name, self.errors) if self.errors else ""

    def status(self) -> dict[str, Any]:
        """The Kubernetes Status object for `-o json` (only meaningful when rejected)."""
        if self.problem is not None:
            return bad_request_status(self.problem)
        return to_status(self.kind, self.name, self.errors)


def validate_document(
    doc: Mapping[str, Any],
    *,
    old: ApiObject | Mapping[str, Any] | None = None,
    priority_classes: Mapping[str, PriorityClass] | None = None,
    converted: bool = False,
    field_validation: FieldValidation = "Warn",
) -> ValidationResult:
    """Admit one document: convert a v1.35 shape (with a warning), decode, default, resolve priority (when
    the known PriorityClasses are given), validate, and validate the update against `old` when the object
    exists already. All errors are reported at once.

    Convert a whole batch with conversion.convert_documents first when pods may carry v1.35 workloadRefs:
    only the batch conversion creates their implied PodGroups; then pass `converted=True` to skip converting
    (and copying) each document again. Pass `priority_classes` on updates whenever the stored `old` object was
    admitted with them, so that both sides carry resolved priorities. `field_validation` says what unknown
    fields do (the API server's default, Warn, unless given). `doc` is never changed."""
    document, warnings = (dict(doc), []) if converted else convert_document(doc)
    try:
        obj = parse_object(document)
    except ManifestError as error:
        return ValidationResult(None, warnings=tuple(warnings), problem=str(error), status_code=400)
    except InvalidObjectError as error:
        return _rejected(error.kind, document, error.errors, warnings)
    unknown = [f'unknown field "{path}"' for path in unknown_fields(obj)]
    if unknown and field_validation == "Strict":
        return _undecodable(obj, strict_decoding_message(obj, unknown), warnings)
    if unknown:
        drop_unknown_fields(obj)  # taken without them, as the API server decodes it
        _forget_unset_fields(obj)
        if field_validation == "Warn":
            warnings += unknown
    warnings += [
        f'unknown Podway annotation "{key}"' for key in unknown_podway_annotations(obj.metadata.annotations)
    ]
    # obj was just parsed (pydantic builds its own parts): default and resolve it in place.
    obj = apply_defaults_in_place(obj)
    errors: list[FieldError] = []
    if priority_classes is not None:
        errors = resolve_priority_in_place(obj, priority_classes)
    errors += validate_object(obj)
    if old is not None:
        errors += validate_update(_prepare_old(old), obj)
    if errors:
        return _rejected(obj.KIND, document, errors, warnings)
    return ValidationResult(
        obj, warnings=tuple(warnings), kind=obj.KIND, name=obj.name, namespace=obj.namespace
    )


def _forget_unset_fields(obj: ApiObject) -> None:
    """Take out of `metadata.managedFields` the fields the object does not set (the unknown ones dropped):
    a manager owns only what is there, and one left owning nothing goes."""
    extra = obj.metadata.__pydantic_extra__ or {}
    entries = extra.get("managedFields")
    if not isinstance(entries, list):
        return
    present = obj.model_dump(mode="json", by_alias=True, exclude_unset=True)
    kept = []
    for entry in entries:
        tree = entry.get("fieldsV1") if isinstance(entry, dict) else None
        if not isinstance(tree, dict):
            kept.append(entry)
        elif owned := {path for path in from_fields_v1(tree) if value_at(present, path)[0]}:
            kept.append({**entry, "fieldsV1": to_fields_v1(owned)})
    extra["managedFields"] = kept


def strict_decoding_message(obj: ApiObject, unknown: Sequence[str]) -> str:
    """The API server's refusal of an object with unknown fields under `fieldValidation=Strict`:
    `Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field "spec.x", ...`."""
    version = (obj.api_version or obj.API_VERSION).rpartition("/")[2]
    return (
        f'{obj.KIND} in version "{version}" cannot be handled as a {obj.KIND}: '
        f"strict decoding error: {', '.join(unknown)}"
    )


def _undecodable(obj: ApiObject, problem: str, warnings: list[str]) -> ValidationResult:
    return ValidationResult(
        None,
        warnings=tuple(warnings),
        kind=obj.KIND,
        name=obj.name,
        namespace=obj.namespace,
        problem=problem,
        status_code=400,
    )


def _prepare_old(old: ApiObject | Mapping[str, Any]) -> ApiObject:
    if isinstance(old, ApiObject):
        return apply_defaults(old)
    converted, _ = convert_document(old)
    return apply_defaults_in_place(parse_object(converted))


def _rejected(
    kind: str, doc: Mapping[str, Any], errors: Sequence[FieldError], warnings: list[str]
) -> ValidationResult:
    metadata = doc.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return ValidationResult(
        None,
        errors=tuple(errors),
        warnings=tuple(warnings),
        kind=kind,
        name=_document_name(doc),
        namespace=namespace if isinstance(namespace, str) else None,
        status_code=422,
    )
