"""FieldsV1, the field sets `metadata.managedFields` records: a tree of elements (`f:name` a field,
`k:{"name":"x"}` a list item by its key, `v:"x"` a set's value, `.` the node itself), read as paths, tuples
of elements from the object's root."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

Path = tuple[str, ...]
Object = dict[str, Any]


def step(node: Any, element: str) -> tuple[bool, Any]:
    """Whether `element` is in `node`, and what it holds there (an element this reader cannot read is not)."""
    kind, _, rest = element.partition(":")
    if kind == "f":
        return (isinstance(node, dict) and rest in node), (node.get(rest) if isinstance(node, dict) else None)
    if not isinstance(node, list):
        return False, None
    try:
        wanted = json.loads(rest)
    except ValueError:
        return False, None
    if kind == "v":
        return (wanted in node), wanted
    if kind == "k" and isinstance(wanted, dict):
        for item in node:
            if isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
                return True, item
    return False, None


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """Whether the path is set in `obj`, and its value."""
    node = obj
    for element in path:
        found, node = step(node, element)
        if not found:
            return False, None
    return True, node


def to_fields_v1(paths: Iterable[Path]) -> Object:
    """The FieldsV1 tree of a path set (`.` marks a node owned itself as well as its children)."""
    members = set(paths)
    tree: Object = {}
    for path in members:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    for path in members:
        node = tree
        for element in path:
            node = node[element]
        if node and "." not in node:
            node["."] = {}
    return _sorted(tree)


def _sorted(tree: Object) -> Object:
    return {key: _sorted(tree[key]) for key in sorted(tree)}


def from_fields_v1(tree: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, sub in tree.items():
        if key == ".":
            paths.add(prefix)
            continue
        path = (*prefix, key)
        if sub:
            paths |= from_fields_v1(sub, path)
        else:
            paths.add(path)
    return paths
