"""Bad input gets a clear answer, never a crash: every example manifest, with values replaced by values of
the wrong type or shape, is either admitted or rejected with field errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.api.conversion import convert_documents
from libs.api.manifests import load_documents, validate_document

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
DOCS = [d for f in sorted(EXAMPLES.glob("0*.yaml")) for d in load_documents(f.read_text())]
WRONG = ["x", 3, -1, None, [], {}, ["x"], {"a": 1, 0: "y"}, True, 1.5, "", 10**12]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_validation_never_crashes_on_wrongly_shaped_values(data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(DOCS)))
    paths = _paths(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        try:
            _replace(doc, path, copy.deepcopy(data.draw(st.sampled_from(WRONG))))
        except (TypeError, IndexError, KeyError):
            continue  # the path no longer exists after an earlier replacement
    result = validate_document(doc)
    convert_documents([doc])
    assert result.ok or result.message
