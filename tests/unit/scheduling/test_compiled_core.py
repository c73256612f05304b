"""The scheduling core compiled by mypyc: used only while built from the source as it is, and deciding
exactly as the interpreted core does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from libs.core.scheduling import native

REPO = Path(__file__).resolve().parents[3]

# A churning fleet (cycles, applies and completions), then a digest of every node's state and every pod.
CHURN_DIGEST = """
import argparse, hashlib, json
import libs.core.scheduling as core
from bench.scheduler_core import build_nodes
from bench.scheduler_churn import _Churn, _Fleet, GPU_CLASS, GPU_RESOURCE
from libs.core.scheduling import ClusterSnapshot

args = argparse.Namespace(blocks=2, racks_per_block=4, nodes_per_rack=8, gpus_per_node=8, fill_band=(0.9, 0.95),
                          churn_period=200, churn_attempts=5, seed=7)
nodes = build_nodes(args)
snapshot = ClusterSnapshot(nodes, extended_resource_names={GPU_CLASS: GPU_RESOURCE})
fleet = _Fleet(snapshot, len(nodes) * 8, args)
fleet.fill_to_band()
result = _Churn()
fleet.churn(1500, result)
digest = hashlib.sha256()
for node in sorted(snapshot.node_states(), key=lambda n: n.name):
    digest.update(repr((node.name, node.free_cpu, node.free_memory, node.free_pods, node.free_devices,
                        sorted(node.pod_uids))).encode())
print(json.dumps({"compiled": core.COMPILED, "digest": digest.hexdigest(), "placed": result.placed_pods,
                  "failed": len(result.failed_seconds)}))
"""


def _churn(interpreted: bool) -> dict[str, object]:
    env = {**os.environ, native.INTERPRETED_ENV: "1" if interpreted else ""}
    done = subprocess.run(
        [sys.executable, "-c", CHURN_DIGEST], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_compiled_core_places_every_pod_where_the_interpreted_core_does() -> None:
    compiled = _churn(interpreted=False)
    if not compiled["compiled"]:
        pytest.skip("the scheduling core is not compiled here (make install compiles it)")
    interpreted = _churn(interpreted=True)

    assert interpreted["compiled"] is False
    assert compiled["placed"] == interpreted["placed"]
    assert compiled["placed"] != 0
    assert compiled["failed"] == interpreted["failed"]
    assert compiled["digest"] == interpreted["digest"]


def _built(root: Path, stamp: dict[str, object]) -> Path:
    (root / "libs" / "core" / "scheduling").mkdir(parents=True)
    (root / native.STAMP).write_text(json.dumps(stamp))
    return root


def test_a_build_of_the_source_as_it_is_goes_first_on_the_package_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(native.INTERPRETED_ENV, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    root = _built(tmp_path, native.stamp_for())
    path = ["/src/libs/core/scheduling"]

    assert native.use_compiled(path, root)
    assert path == [str(root / "libs" / "core" / "scheduling"), "/src/libs/core/scheduling"]
    assert sys.path[-1] == str(root)


def test_a_build_of_other_source_or_another_interpreter_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(native.INTERPRETED_ENV, raising=False)
    current = native.stamp_for()
    sources = dict(current["sources"])  # type: ignore[call-overload]
    sources["packing.py"] = "0" * 64
    edited = _built(tmp_path / "edited", {**current, "sources": sources})
    other_python = _built(tmp_path / "other", {**current, "python": "cpython-399"})
    failed = _built(tmp_path / "failed", {"failed": "no C compiler"})
    path: list[str] = []

    for root in (edited, other_python, failed, tmp_path / "never-built"):
        assert not native.use_compiled(path, root), root.name
    assert path == []


def test_the_interpreted_core_can_be_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.INTERPRETED_ENV, "1")
    root = _built(tmp_path, native.stamp_for())
    path: list[str] = []

    assert not native.use_compiled(path, root)
    assert path == []
