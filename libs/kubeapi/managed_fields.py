"""Field ownership as server-side apply records it in `metadata.managedFields`, simplified from
`k8s.io/apimachinery/pkg/util/managedfields` and structured-merge-diff.

Each write is recorded against its manager: an apply owns the fields its configuration sets, an update
(create, replace, patch) owns the fields it changed. An apply that would change a field another manager owns
is a conflict (409, worded as `internal/conflict.go`) unless forced; fields an applier stops setting are
removed when nobody else owns them. Lists with merge keys are owned per item (`k:{"name":"x"}`), scalar
sets per value (`v:"x"`), other lists whole. Paths are tuples of FieldsV1 keys (`f:spec`, `k:{...}`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from libs.api.conversion import copy_value
from libs.api.fields_v1 import Object, Path, from_fields_v1, step, to_fields_v1, value_at
from libs.kubeapi import status
from libs.kubeapi.merge_keys import Field, Schema, child, children_of, schema_of

_SYSTEM: Final[frozenset[Path]] = frozenset(
    {("f:apiVersion",), ("f:kind",)}
    | {
        ("f:metadata", f"f:{name}")
        for name in (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        )
    }
)
"""Fields no manager owns (the field manager strips them before it compares)."""


@dataclass(frozen=True, slots=True)
class Conflict:
    manager: str
    path: Path


class ApplyConflict(Exception):
    """An apply that would change fields other managers own; `status` is the 409 answer."""

    def __init__(self, conflicts: list[Conflict], entries: Mapping[str, Object]) -> None:
        self.conflicts = conflicts
        self.status = status.apply_conflict(
            _conflict_message(conflicts, entries),
            [
                {
                    "reason": "FieldManagerConflict",
                    "message": f"conflict with {_print_manager(entries[c.manager])}",
                    "field": path_string(c.path),
                }
                for c in conflicts
            ],
        )
        super().__init__(self.status["message"])


# ---------------------------------------------------------------- paths


def _key_element(item: Mapping[str, Any], key: str) -> str:
    return "k:" + json.dumps({key: item[key]}, separators=(",", ":"))


def _value_element(value: Any) -> str:
    return "v:" + json.dumps(value, separators=(",", ":"))


def fields_of(value: Any, schema: Schema | None) -> set[Path]:
    """Every field path a value sets."""
    return set(field_values(value, schema))


def field_values(value: Any, schema: Schema | None) -> dict[Path, Any]:
    """Every field path a value sets, with the value there (what `value_at` finds: for a list item, the
    first with its key)."""
    found: dict[Path, Any] = {}
    _collect(value, schema, None, (), found)
    # Every system path is one or two elements long.
    return {
        path: at for path, at in found.items() if path and path[:1] not in _SYSTEM and path[:2] not in _SYSTEM
    }


def _collect(
    value: Any, schema: Schema | None, spec: Field | None, prefix: Path, found: dict[Path, Any]
) -> None:
    if isinstance(value, dict):
        if not value or (spec and spec.free_map):
            found.setdefault(prefix, value)
        for key, item in value.items():
            field_spec = child(schema, key)
            _collect(item, children_of(field_spec), field_spec, (*prefix, f"f:{key}"), found)
    elif isinstance(value, list) and spec and spec.merge and spec.merge_key:
        if not value:
            found.setdefault(prefix, value)
        for item in value:
            if isinstance(item, dict) and spec.merge_key in item:
                path = (*prefix, _key_element(item, spec.merge_key))
                found.setdefault(path, item)
                _collect_fields(item, spec.children, path, found)
    elif isinstance(value, list) and spec and spec.merge:
        found.setdefault(prefix, value)
        for item in value:
            found.setdefault((*prefix, _value_element(item)), item)
    else:
        found.setdefault(prefix, value)


def _collect_fields(
    item: Mapping[str, Any], schema: Schema | None, prefix: Path, found: dict[Path, Any]
) -> None:
    for key, value in item.items():
        field_spec = child(schema, key)
        _collect(value, children_of(field_spec), field_spec, (*prefix, f"f:{key}"), found)


def _leaves(paths: set[Path]) -> set[Path]:
    """The paths no other path of the set extends."""
    parents = {path[:end] for path in paths for end in range(1, len(path))}
    return paths - parents


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: `.spec.containers[name="app"].image`."""
    text = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            text += f".{rest}"
        elif kind == "v":
            text += f"[={rest}]"
        else:
            keys = json.loads(rest)
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(keys.items())) + "]"
    return text


def _remove(obj: Any, path: Path) -> None:
    found, parent = value_at(obj, path[:-1])
    if not found:
        return
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif isinstance(parent, list):
        _, item = step(parent, path[-1])
        if kind == "v":
            parent[:] = [kept for kept in parent if kept != item]
        elif item is not None:
            parent.remove(item)


# ---------------------------------------------------------------- managers


def _identity(entry: Mapping[str, Any]) -> str:
    """`BuildManagerIdentifier`: manager, operation, subresource, and the version of an update."""
    version = "" if entry.get("operation") == "Apply" else entry.get("apiVersion", "")
    identity = [entry.get("manager"), entry.get("operation"), entry.get("subresource", ""), version]
    try:
        return orjson.dumps(identity).decode()  # every write asks, several times
    except orjson.JSONEncodeError:  # what orjson refuses in a client's entry (a lone surrogate)
        return json.dumps(identity)


def _print_manager(entry: Mapping[str, Any]) -> str:
    shown = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        shown += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == "Update":
        shown += f" using {entry.get('apiVersion', '')}"
    return shown


def _conflict_message(conflicts: list[Conflict], entries: Mapping[str, Object]) -> str:
    if len(conflicts) == 1:
        only = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {_print_manager(entries[only.manager])}: {path_string(only.path)}"
    by_manager: dict[str, list[Path]] = {}
    for conflict in conflicts:
        by_manager.setdefault(conflict.manager, []).append(conflict.path)
    lines = []
    for manager in sorted(by_manager, key=lambda m: entries[m].get("manager", "")):
        lines.append(f"conflicts with {_print_manager(entries[manager])}:")
        lines.extend(f"- {path_string(path)}" for path in by_manager[manager])
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


def _entries(obj: Mapping[str, Any] | None) -> dict[str, tuple[Object, set[Path]]]:
    managed = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    return {
        _identity(entry): (entry, from_fields_v1(entry.get("fieldsV1") or {}))
        for entry in managed
        if isinstance(entry, dict)
    }


def _timestamp(now: Any) -> str:
    return now if isinstance(now, str) else now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(
    manager: str,
    operation: str,
    api_version: str,
    now: Any,
    paths: set[Path],
    *,
    fields: Object | None = None,
) -> Object:
    """A managedFields entry owning `paths` (`fields`: their FieldsV1, when the caller has it)."""
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": _timestamp(now),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields if fields is not None else to_fields_v1(paths),
    }


def _managed_list(entries: dict[str, tuple[Object, set[Path]]], read: Mapping[str, int]) -> list[Object]:
    """The entries as managedFields; one whose paths are those it was read with (`read`: how many, by
    identity; a write only takes paths from the entries it read) keeps its FieldsV1 as read."""
    result = []
    for identity, (entry, paths) in entries.items():
        if paths:
            kept = read.get(identity) == len(paths) and "fieldsV1" in entry
            result.append(entry if kept else {**entry, "fieldsV1": to_fields_v1(paths)})
    return result


def _sizes(entries: dict[str, tuple[Object, set[Path]]]) -> dict[str, int]:
    return {identity: len(paths) for identity, (_, paths) in entries.items()}


def _kind_schema(obj: Mapping[str, Any]) -> Schema:
    return schema_of(str(obj.get("kind", "")))


def _merge(live: Any, applied: Any, spec: Field | None, schema: Schema | None) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict):
        merged = dict(live)
        for key, value in applied.items():
            field_spec = child(schema, key)
            merged[key] = _merge(live.get(key), value, field_spec, children_of(field_spec))
        return merged
    if isinstance(live, list) and isinstance(applied, list) and spec and spec.merge:
        return _merge_list(live, applied, spec)
    return copy_value(applied)


def _merge_list(live: list[Any], applied: list[Any], spec: Field) -> list[Any]:
    if not spec.merge_key:
        return [*live, *(item for item in applied if item not in live)]
    key = spec.merge_key
    merged = list(live)
    for item in applied:
        position = next(
            (i for i, kept in enumerate(merged) if isinstance(kept, dict) and kept.get(key) == item.get(key)),
            None,
        )
        if position is None:
            merged.append(copy_value(item))
        else:
            merged[position] = _merge(merged[position], item, None, spec.children)
    return merged


def apply_configuration(
    live: Object | None, applied: Object, manager: str, force: bool, now: Any, api_version: str = ""
) -> tuple[Object, list[Object]]:
    """Server-side apply of `applied` by `manager` onto `live` (None when the object is new): the merged
    object (with its managedFields) and the managedFields. Raises ApplyConflict (409) when another manager
    owns a field the configuration changes, unless `force` takes it over."""
    schema = _kind_schema(applied) if applied.get("kind") else _kind_schema(live or {})
    version = api_version or str(applied.get("apiVersion", ""))
    base = copy_value(live) if live else {}
    entries = _entries(base)
    read = _sizes(entries)
    wanted = fields_of(applied, schema)
    own_id = _identity({"manager": manager, "operation": "Apply"})
    _settle_conflicts(base, applied, wanted, entries, own_id, force)
    previous = entries.pop(own_id, ({}, set()))[1]
    others: set[Path] = set().union(*(paths for _, paths in entries.values()))
    for path in sorted(previous - wanted - others, key=len, reverse=True):
        _remove(base, path)
    merged = _merge(base, applied, None, schema)
    entries[own_id] = (_entry(manager, "Apply", version, now, wanted), wanted)
    read[own_id] = len(wanted)  # its FieldsV1 is written
    managed = _managed_list(entries, read)
    merged.setdefault("metadata", {})["managedFields"] = managed
    return merged, managed


def _settle_conflicts(
    live: Object,
    applied: Object,
    wanted: set[Path],
    entries: dict[str, tuple[Object, set[Path]]],
    own_id: str,
    force: bool,
) -> None:
    """Raise ApplyConflict for contested fields, or (forced) take them from their owners."""
    conflicts: list[Conflict] = []
    leaves = _leaves(wanted)
    for identity, (_, owned) in entries.items():
        if identity == own_id:
            continue
        for path in sorted(owned & leaves):
            if value_at(live, path) != value_at(applied, path):
                conflicts.append(Conflict(identity, path))
    if conflicts and not force:
        raise ApplyConflict(conflicts, {identity: entry for identity, (entry, _) in entries.items()})
    for conflict in conflicts:
        entries[conflict.manager][1].discard(conflict.path)


def record_update(
    live_before: Object | None,
    live_after: Object,
    manager: str,
    operation: str = "Update",
    now: Any = "",
    api_version: str = "",
) -> list[Object]:
    """The managedFields after a non-apply write (create, update, patch): `manager` owns the fields it
    changed, other managers lose them, fields the write removed are nobody's."""
    schema = _kind_schema(live_after)
    stored = _entries(live_before)
    # Entries a create was sent with are the client's: written out again, in canonical form.
    entries, read = (stored, _sizes(stored)) if stored else (_entries(live_after), {})
    after_values = field_values(live_after, schema)
    before_values = field_values(live_before, schema) if live_before else {}
    after, before = set(after_values), set(before_values)
    changed = after - before
    changed |= {path for path in _leaves(after) & before if before_values[path] != after_values[path]}
    version = api_version or str(live_after.get("apiVersion", ""))
    own_id = _identity({"manager": manager, "operation": operation, "apiVersion": version})
    for identity, (_, owned) in entries.items():
        owned &= after
        if identity != own_id:
            owned -= changed
    entry, previous = entries.pop(own_id, ({}, set()))
    # `previous` lost what the write removed: it is as read when its size is, and then `mine` is too when
    # the write changed nothing outside it.
    unchanged = read.pop(own_id, None) == len(previous) and changed <= previous
    mine = previous | changed
    if mine:
        fields = entry.get("fieldsV1") if unchanged else None
        entries[own_id] = (_entry(manager, operation, version, now, mine, fields=fields), mine)
        read[own_id] = len(mine)  # its FieldsV1 is written
    return _managed_list(entries, read)
