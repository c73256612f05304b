"""ObjectMeta validation (`ValidateObjectMeta`): names, namespace, labels, annotations, owner references."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from libs.api.annotations import validate_podway_annotations
from libs.api.errors import FieldError, FieldPath, forbidden, invalid, required, too_long
from libs.api.formats import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
)
from libs.api.models.meta import ObjectMeta, OwnerReference
from libs.api.validation.common import FormatCheck

METADATA: Final = FieldPath("metadata")
TOTAL_ANNOTATION_SIZE_LIMIT: Final = 256 * 1024


def validate_object_meta(
    meta: ObjectMeta,
    *,
    namespaced: bool,
    name_check: FormatCheck = dns1123_subdomain_errors,
    path: FieldPath = METADATA,
) -> list[FieldError]:
    """Every metadata error of an object, in the API server's order."""
    errors = _validate_names(meta, name_check, path)
    errors += _validate_namespace(meta.namespace, namespaced, path.child("namespace"))
    # Empty maps and lists have nothing to report: their checks are skipped outright.
    if meta.labels:
        errors += validate_labels(meta.labels, path.child("labels"))
    if meta.annotations:
        errors += validate_annotations(meta.annotations, path.child("annotations"))
    if meta.owner_references:
        errors += _validate_owner_references(meta.owner_references, path.child("ownerReferences"))
    return errors


def _validate_names(meta: ObjectMeta, name_check: FormatCheck, path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    if meta.generate_name:
        # A generated name appends random characters, so a trailing '-' in the prefix is fine.
        prefix = meta.generate_name[:-1] + "a" if meta.generate_name.endswith("-") else meta.generate_name
        errors += [invalid(path.child("generateName"), meta.generate_name, msg) for msg in name_check(prefix)]
    if not meta.name:
        if not meta.generate_name:
            errors.append(required(path.child("name"), "name or generateName is required"))
        return errors
    errors += [invalid(path.child("name"), meta.name, message) for message in name_check(meta.name)]
    return errors


def _validate_namespace(namespace: str | None, namespaced: bool, path: FieldPath) -> list[FieldError]:
    if not namespaced:
        return [forbidden(path, "not allowed on this type")] if namespace else []
    if not namespace:
        return [required(path)]
    return [invalid(path, namespace, message) for message in dns1123_label_errors(namespace)]


def validate_labels(labels: Mapping[str, str], path: FieldPath) -> list[FieldError]:
    """`ValidateLabels`: every key a label key, every value a label value; errors sit on the map's path."""
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors += [invalid(path, key, message) for message in label_key_errors(key)]
        errors += [invalid(path, value, message) for message in label_value_errors(value)]
    return errors


def validate_annotations(annotations: Mapping[str, str], path: FieldPath) -> list[FieldError]:
    """`ValidateAnnotations` (keys, total size) plus Podway's own annotations."""
    errors: list[FieldError] = []
    if not annotations:
        return errors
    for key in annotations:
        errors += [invalid(path, key, message) for message in label_key_errors(key.lower())]
    if sum(len(key) + len(value) for key, value in annotations.items()) > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    errors += validate_podway_annotations(annotations, path)
    return errors


def _validate_owner_references(references: Sequence[OwnerReference], path: FieldPath) -> list[FieldError]:
    # uid may be absent: Podway derives one for objects it generates (unlike the API server).
    errors: list[FieldError] = []
    controller_name: str | None = None
    for reference in references:
        errors += _validate_owner_reference(reference, path)
        if not reference.controller:
            continue
        if controller_name is not None:
            detail = (
                'Only one reference can have Controller set to true. Found "true" in references for '
                f"{controller_name} and {reference.name}"
            )
            errors.append(invalid(path, [ref.to_wire() for ref in references], detail))
        else:
            controller_name = reference.name or ""
    return errors


def _validate_owner_reference(reference: OwnerReference, path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    version = (reference.api_version or "").rpartition("/")[2]
    if not version:
        errors.append(
            invalid(path.child("apiVersion"), reference.api_version or "", "version must not be empty")
        )
    if not reference.kind:
        errors.append(invalid(path.child("kind"), reference.kind or "", "kind must not be empty"))
    if not reference.name:
        errors.append(invalid(path.child("name"), reference.name or "", "name must not be empty"))
    return errors
