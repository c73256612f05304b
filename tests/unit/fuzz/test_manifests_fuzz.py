"""Property-based fuzzing of every manifest kind: valid examples mutated at random paths (values of the wrong
type, out of range, deleted, unknown fields added) are admitted or rejected, never crash admission, and every
rejection names its field paths in printable text."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.api.manifests import MODELS, load_documents, to_manifest, validate_document

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"

EXTRA_SEEDS = """
apiVersion: v1
kind: Namespace
metadata: {name: research, labels: {team: a}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpu.example.com}
spec:
  driver: gpu.example.com
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  nodeName: node-a
  devices:
  - name: gpu-0
    attributes: {model: {string: H200}, numaNode: {int: 0}}
    capacity: {memory: {value: 141Gi}}
    allowMultipleAllocations: true
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: ml}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1}
"""


def _seeds() -> dict[str, dict[str, Any]]:
    seeds: dict[str, dict[str, Any]] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in load_documents(path.read_text()):
            seeds.setdefault(str(document.get("kind")), document)
    for document in yaml.safe_load_all(EXTRA_SEEDS):
        seeds.setdefault(document["kind"], document)
    return seeds


SEEDS = _seeds()
KINDS = sorted(SEEDS)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**65), max_value=2**65)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["", "-1", "0", "1Gi", "x" * 300, "UPPER", "a/b", "\x1b[2J", "\u202e", "1e400"])
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for position, child in enumerate(value):
            found += _paths(child, (*prefix, position))
    return found


def _mutate(document: dict[str, Any], path: tuple[Any, ...], operation: str, value: Any) -> None:
    parent: Any = document
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if operation == "delete":
        del parent[last]
    elif operation == "add" and isinstance(parent[last], dict):
        parent[last]["fuzzField"] = value
    else:
        parent[last] = value


@st.composite
def mutated(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    document = copy.deepcopy(SEEDS[kind])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(document) if p[0] not in ("apiVersion", "kind")]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        _mutate(document, path, draw(st.sampled_from(["replace", "delete", "add"])), draw(values))
    return document


def _check(document: dict[str, Any]) -> None:
    result = validate_document(document)
    _check_strict(document, [w for w in result.warnings if w.startswith("unknown field ")])
    if result.ok:
        assert result.obj is not None
        again = validate_document(to_manifest(result.obj))
        assert again.ok, again.message  # what admission stores is itself admissible
        return
    assert result.problem or result.errors, "a rejection without a reason"
    for error in result.errors:
        assert error.path, f"an error without a field path: {error}"
    assert all(line.isprintable() for line in result.message.splitlines())


def _check_strict(document: dict[str, Any], unknown: list[str]) -> None:
    """Strict refuses exactly the documents Warn warned about, naming every unknown field they have."""
    strict = validate_document(document, field_validation="Strict")
    if unknown:
        assert not strict.ok
        assert strict.message.endswith("strict decoding error: " + ", ".join(unknown)), strict.message
    else:
        assert "strict decoding error" not in strict.message


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_a_seed(kind: str) -> None:
    assert validate_document(SEEDS[kind]).ok
    assert any(kind == model.KIND for model in MODELS.values())


def test_every_manifest_kind_is_fuzzed() -> None:
    assert {model.KIND for model in MODELS.values()} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_manifests_are_admitted_or_rejected_with_field_paths(kind: str, data: st.DataObject) -> None:
    _check(data.draw(mutated(kind)))
