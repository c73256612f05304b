"""Patches applied to a stored object as kube-apiserver applies them, chosen by the request's content type:
JSON patch (RFC 6902, `gopkg.in/evanphx/json-patch.v4`), JSON merge patch (RFC 7386) and strategic merge
patch (`k8s.io/apimachinery/pkg/util/strategicpatch`, with the kinds' merge keys from `merge_keys`).

A patch that cannot be applied raises PatchError carrying the `Status` the API server answers with
(`apiserver/pkg/endpoints/handlers/patch.go`). Server-side apply (`application/apply-patch+yaml`) is
`managed_fields.apply_configuration`, re-exported here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import yaml

from libs.api.conversion import copy_value
from libs.kubeapi import status
from libs.kubeapi.managed_fields import ApplyConflict, apply_configuration, record_update
from libs.kubeapi.merge_keys import Field, Schema, child, children_of, schema_of

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "PATCH_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "YAML_LOADER",
    "ApplyConflict",
    "PatchError",
    "apply_configuration",
    "apply_patch",
    "decode_apply",
    "media_type",
    "record_update",
]

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
PATCH_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
"""The patch types a built-in resource accepts, in the order the 415 answer lists them."""

MAX_JSON_PATCH_OPERATIONS: Final = 10000
YAML_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML has it: the pure-Python scanner takes seconds, holding the event loop, on a
100 KB body of nested flow collections (`[[[[...`), which libyaml refuses at once."""

Object = dict[str, Any]


class PatchError(Exception):
    """A patch the API server refuses; `status` is its answer and `detail` the underlying reason (which the
    API server does not always show)."""

    def __init__(self, answer: dict[str, Any], detail: str = "") -> None:
        super().__init__(answer["message"] if not detail else f"{answer['message']}: {detail}")
        self.status = answer
        self.code: int = answer["code"]
        self.detail = detail


def media_type(content_type: str | None) -> str:
    """The media type without parameters (`; charset=utf-8`), as the handler strips it."""
    return (content_type or "").split(";", 1)[0].strip()


def apply_patch(content_type: str | None, live: Object, body: bytes | str, kind: str = "") -> Object:
    """`live` with the patch applied; `live` itself is left unchanged. `kind` picks the merge keys of a
    strategic merge patch."""
    patch_type = media_type(content_type)
    if patch_type not in PATCH_TYPES:
        raise PatchError(status.unsupported_media_type(PATCH_TYPES))
    try:
        return _apply(patch_type, live, body, kind)
    except RecursionError:
        raise PatchError(status.bad_request("exceeded max depth")) from None


def _apply(patch_type: str, live: Object, body: bytes | str, kind: str) -> Object:
    if patch_type == JSON_PATCH:
        return apply_json_patch(live, _decode_json_patch(body))
    if patch_type == MERGE_PATCH:
        return _as_object(apply_merge_patch(live, _decode_merge_patch(body)))
    if patch_type == STRATEGIC_MERGE_PATCH:
        return apply_strategic_merge_patch(live, _decode_strategic_patch(body), kind)
    raise ValueError("server-side apply goes through apply_configuration")


# ---------------------------------------------------------------- decoding


def _text(body: bytes | str) -> str:
    """The body as text; bytes that are not UTF-8 read as U+FFFD, as Go's decoders read them."""
    return body.decode(errors="replace") if isinstance(body, bytes) else body


def _go_kind(value: Any) -> str:
    """How Go's encoding/json names a JSON value's type in its unmarshal errors."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _load(body: bytes | str) -> tuple[Any, str]:
    """The JSON document, or None and Go's syntax error wording."""
    text = _text(body)
    try:
        return json.loads(text), ""
    except RecursionError:
        return None, "exceeded max depth"
    except json.JSONDecodeError as error:
        if error.pos >= len(text.rstrip()):
            return None, "unexpected end of JSON input"
        return None, f"invalid character {text[error.pos]!r} looking for beginning of value"


def _decode_json_patch(body: bytes | str) -> list[Object]:
    document, syntax = _load(body)
    if syntax:
        raise PatchError(status.bad_request(syntax))
    if not isinstance(document, list):
        kind = _go_kind(document)
        raise PatchError(
            status.bad_request(f"json: cannot unmarshal {kind} into Go value of type jsonpatch.Patch")
        )
    for operation in document:
        if not isinstance(operation, dict):
            kind = _go_kind(operation)
            raise PatchError(
                status.bad_request(f"json: cannot unmarshal {kind} into Go value of type jsonpatch.Operation")
            )
    if len(document) > MAX_JSON_PATCH_OPERATIONS:
        detail = f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {len(document)}"
        raise PatchError(status.request_entity_too_large(detail))
    return document


def _decode_merge_patch(body: bytes | str) -> Any:
    document, syntax = _load(body)
    if syntax or document is None:
        raise PatchError(status.bad_request("Invalid JSON Patch"))
    return document


def _decode_strategic_patch(body: bytes | str) -> Object:
    document, syntax = _load(body)
    if syntax:
        raise PatchError(status.bad_request(syntax))
    if not isinstance(document, dict):
        kind = _go_kind(document) if document is not None else "null"
        if document is None:
            return {}
        raise PatchError(
            status.bad_request(
                f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
            )
        )
    return document


def decode_apply(body: bytes | str) -> Object:
    """The applied configuration of a server-side apply (YAML or JSON), or PatchError 400."""
    try:
        document = yaml.load(_text(body), Loader=YAML_LOADER)
    except yaml.YAMLError as error:
        raise PatchError(status.bad_request(f"error decoding YAML: {error}")) from None
    except RecursionError:
        raise PatchError(status.bad_request("error decoding YAML: exceeded max depth")) from None
    if not isinstance(document, dict):
        kind = _go_kind(document)
        raise PatchError(
            status.bad_request(
                f"error decoding YAML: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
            )
        )
    return document


def _as_object(document: Any) -> Object:
    """A patched document that must still be an object (the handler decodes it into the kind)."""
    if isinstance(document, dict):
        return document
    rendered = json.dumps(document, separators=(",", ":"))
    detail = f"json: cannot unmarshal {_go_kind(document)} into Go value of type map[string]interface {{}}"
    body = f'Invalid value: "{rendered}": {detail}'
    answer = status.failure(
        422,
        "Invalid",
        f' "" is invalid: patch: {body}',
        {"causes": [{"reason": "FieldValueInvalid", "message": body, "field": "patch"}]},
    )
    raise PatchError(answer)


# ---------------------------------------------------------------- JSON patch (RFC 6902)


class _NotApplied(Exception):
    """An operation that does not apply: answered 422 with the generic message."""


def _pointer(path: Any) -> list[str]:
    """The reference tokens of a JSON pointer (`~1` is `/`, `~0` is `~`)."""
    if not isinstance(path, str):
        raise _NotApplied("operation missing path")
    if path == "":
        return []
    if not path.startswith("/"):
        raise _NotApplied(f"invalid JSON pointer: {path}")
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _index(token: str, size: int, adding: bool) -> int:
    if token == "-" and adding:
        return size
    try:
        index = int(token)
    except ValueError:
        raise _NotApplied(f"invalid index: {token}") from None
    if index < 0:  # json-patch v4 takes negative indices from the end
        index += size
    if index < 0 or index > size or (index == size and not adding):
        raise _NotApplied(f"Unable to access invalid index: {token}")
    return index


def _container(doc: Any, tokens: list[str]) -> Any:
    """The value holding the last token (the document for the root)."""
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, len(node), adding=False)]
        else:
            raise _NotApplied("doc is missing path: " + "/" + "/".join(tokens))
    return node


def _get(doc: Any, tokens: list[str]) -> tuple[bool, Any]:
    if not tokens:
        return True, doc
    try:
        parent = _container(doc, tokens)
    except _NotApplied:
        return False, None
    last = tokens[-1]
    if isinstance(parent, dict):
        return (last in parent), parent.get(last)
    if isinstance(parent, list):
        try:
            return True, parent[_index(last, len(parent), adding=False)]
        except _NotApplied:
            return False, None
    return False, None


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _container(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), adding=True), value)
    else:
        raise _NotApplied("add operation does not apply: doc is missing path")
    return doc


def _remove(doc: Any, tokens: list[str], op: str) -> Any:
    if not tokens:
        raise _NotApplied(f"{op} operation does not apply: doc is missing path")
    parent = _container(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), adding=False))
    raise _NotApplied(f"{op} operation does not apply: doc is missing key: /{'/'.join(tokens)}")


def _apply_operation(doc: Any, operation: Object) -> Any:
    op = operation.get("op")
    tokens = _pointer(operation.get("path"))
    if op == "add":
        return _add(doc, tokens, copy_value(operation.get("value")))
    if op == "remove":
        _remove(doc, tokens, "remove")
        return doc
    if op == "replace":
        if not _get(doc, tokens)[0]:
            raise _NotApplied(
                f"replace operation does not apply: doc is missing key: {operation.get('path')}"
            )
        if not tokens:
            return copy_value(operation.get("value"))
        _remove(doc, tokens, "replace")
        return _add(doc, tokens, copy_value(operation.get("value")))
    if op in ("move", "copy"):
        source = _pointer(operation.get("from"))
        found, value = _get(doc, source)
        if not found:
            raise _NotApplied(
                f"{op} operation does not apply: doc is missing from path: {operation.get('from')}"
            )
        if op == "move":
            _remove(doc, source, "move")
        return _add(doc, tokens, copy_value(value))
    if op == "test":
        found, value = _get(doc, tokens)
        expected = operation.get("value")
        # json-patch v4: a missing value tests equal to null.
        if (found and value == expected and type(value) is type(expected)) or (
            not found and expected is None
        ):
            return doc
        raise _NotApplied(f"testing value {operation.get('path')} failed: test failed")
    raise _NotApplied(f"Unexpected kind: {op}")


def apply_json_patch(live: Object, operations: Sequence[Object]) -> Object:
    """RFC 6902 operations applied in order; one that does not apply fails the whole patch with 422."""
    doc: Any = copy_value(live)
    try:
        for operation in operations:
            doc = _apply_operation(doc, operation)
    except _NotApplied as error:
        raise PatchError(status.invalid_patch(), str(error)) from None
    return _as_object(doc)


# ---------------------------------------------------------------- JSON merge patch (RFC 7386)


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy_value(patch)
    return _merge_into(copy_value(target) if isinstance(target, dict) else {}, patch)


def _merge_into(result: Object, patch: Object) -> Object:
    """`patch` merged into `result` (a copy the caller owns: it is changed in place)."""
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            result[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            result[key] = copy_value(value)
    return result


# ---------------------------------------------------------------- strategic merge patch

_PATCH: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_DELETE_FROM: Final = "$deleteFromPrimitiveList/"
_ORDER: Final = "$setElementOrder/"


class _StrategicError(Exception):
    """A strategic merge failure and the Status it is answered with (`interpretStrategicMergePatchError`)."""

    def __init__(self, answer: dict[str, Any], detail: str) -> None:
        super().__init__(detail)
        self.answer = answer


def _bad_request(message: str) -> _StrategicError:
    return _StrategicError(status.bad_request(message), message)


def _unprocessable(message: str) -> _StrategicError:
    return _StrategicError(status.invalid_patch(), message)


def _unknown(message: str) -> _StrategicError:
    return _StrategicError(status.unknown_error(message), message)


def _go(value: Any) -> str:
    """A value as Go's %v prints a decoded JSON value (`map[k:v]`, `[a b]`)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{key}:{_go(value[key])}" for key in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go(item) for item in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def apply_strategic_merge_patch(live: Object, patch: Object, kind: str) -> Object:
    """`StrategicMergeMapPatch` with the kind's merge keys."""
    try:
        return _merge_map(copy_value(live), copy_value(patch), schema_of(kind))
    except _StrategicError as error:
        raise PatchError(error.answer, str(error)) from None


def _merge_map(original: Object, patch: Object, schema: Schema | None) -> Object:
    directive = patch.pop(_PATCH, None)
    if directive == "replace":
        return {key: _strip(value, children_of(child(schema, key))) for key, value in patch.items()}
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise _unknown(f"unknown patch type: {directive} in map: {_go({**patch, _PATCH: directive})}")
    _retain_keys(original, patch)
    orders = {key[len(_ORDER) :]: patch.pop(key) for key in list(patch) if key.startswith(_ORDER)}
    deletions = {
        key[len(_DELETE_FROM) :]: patch.pop(key) for key in list(patch) if key.startswith(_DELETE_FROM)
    }
    for key, value in patch.items():
        _merge_key(original, key, value, child(schema, key))
    for key, order in orders.items():
        if key in original and isinstance(original[key], list):
            original[key] = _normalize_order(original[key], order, child(schema, key))
        elif not isinstance(order, list):
            raise _bad_request("invalid patch format of setElementOrder list")
    for key, removed in deletions.items():
        _delete_from_primitive_list(original, key, removed)
    return original


def _merge_key(original: Object, key: str, value: Any, spec: Field | None) -> None:
    if key.startswith("$"):
        return
    if value is None:
        original.pop(key, None)
        return
    present = original.get(key)
    if isinstance(value, dict) and isinstance(present, dict):
        original[key] = _merge_map(present, value, children_of(spec))
    elif isinstance(value, list) and isinstance(present, list):
        original[key] = _merge_list(present, value, spec)
    else:
        original[key] = (
            _strip(value, children_of(spec)) if not isinstance(value, list) else _merge_list([], value, spec)
        )


def _strip(value: Any, schema: Schema | None) -> Any:
    """A value new to the object: nulls dropped and directives carried out against nothing."""
    if isinstance(value, dict):
        return _merge_map({}, value, schema)
    return value


def _retain_keys(original: Object, patch: Object) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retained = patch.pop(_RETAIN_KEYS)
    if not isinstance(retained, list):
        raise _bad_request("invalid patch format of retainKeys")
    keep = set(retained)
    for key, value in patch.items():
        directive = key.startswith((_DELETE_FROM, _ORDER))
        if value is not None and not directive and key not in keep:
            raise _unprocessable("patch content doesn't match retainKeys list")
    for key in list(original):
        if key not in keep:
            del original[key]


def _merge_list(original: list[Any], patch: list[Any], spec: Field | None) -> list[Any]:
    if any(isinstance(item, list) for item in patch):
        raise _unprocessable("lists of lists are not supported")
    if spec is None or not spec.merge:
        return [_strip(item, None) for item in patch if not (isinstance(item, dict) and _PATCH in item)]
    if not spec.merge_key:
        merged = list(original)
        merged.extend(item for item in patch if item not in merged)
        return merged
    return _merge_keyed(original, patch, spec)


def _key_of(item: Any, merge_key: str) -> Any:
    if not isinstance(item, dict) or merge_key not in item:
        shown = _go(item)
        raise _unknown(f"map: {shown} does not contain declared merge key: {merge_key}")
    return item[merge_key]


def _merge_keyed(original: list[Any], patch: list[Any], spec: Field) -> list[Any]:
    key = spec.merge_key
    if any(isinstance(item, dict) and item.get(_PATCH) == "replace" for item in patch):
        return [
            _strip(item, spec.children) for item in patch if not (isinstance(item, dict) and _PATCH in item)
        ]
    merged = list(original)
    for item in patch:
        if isinstance(item, dict) and item.get(_PATCH) == "delete":
            doomed = _key_of(item, key)
            merged = [kept for kept in merged if not (isinstance(kept, dict) and kept.get(key) == doomed)]
            continue
        wanted = _key_of(item, key)
        position = next(
            (i for i, kept in enumerate(merged) if isinstance(kept, dict) and kept.get(key) == wanted), None
        )
        if position is None:
            merged.append(_strip(item, spec.children))
        else:
            merged[position] = _merge_map(merged[position], item, spec.children)
    return merged


def _normalize_order(merged: list[Any], order: Any, spec: Field | None) -> list[Any]:
    """`$setElementOrder`: the listed items in the patch's order, the server's other items interleaved
    where they stood (`normalizeElementOrder` / `mergeSortedSlice`)."""
    if not isinstance(order, list):
        raise _bad_request("invalid patch format of setElementOrder list")
    key = spec.merge_key if spec else ""

    def identity(item: Any) -> Any:
        return json.dumps(item.get(key) if key and isinstance(item, dict) else item, sort_keys=True)

    wanted = [identity(item) for item in order]
    listed = sorted(
        (item for item in merged if identity(item) in wanted), key=lambda i: wanted.index(identity(i))
    )
    server_only = [item for item in merged if identity(item) not in wanted]
    server_order = [identity(item) for item in merged]
    return _merge_sorted(server_only, listed, server_order, identity)


def _merge_sorted(left: list[Any], right: list[Any], server_order: list[Any], identity: Any) -> list[Any]:
    result: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            result.append(left[i])
            i += 1
        elif i >= len(left):
            result.append(right[j])
            j += 1
        else:
            li, ri = identity(left[i]), identity(right[j])
            in_server = li in server_order and ri in server_order
            if in_server and server_order.index(li) < server_order.index(ri):
                result.append(left[i])
                i += 1
            else:
                result.append(right[j])
                j += 1
    return result


def _delete_from_primitive_list(original: Object, key: str, removed: Any) -> None:
    if not isinstance(removed, list):
        raise _bad_request("invalid patch format of primitive list")
    present = original.get(key)
    if isinstance(present, list):
        original[key] = [item for item in present if item not in removed]
