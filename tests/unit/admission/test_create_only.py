"""`create_only` applies, as a DRA driver installs its DeviceClass: an object that exists is left as the user
made it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

from libs.api.manifests import load_documents
from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
from libs.core.admission.model import AdmissionView

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def example(name: str) -> list[dict]:
    return load_documents((EXAMPLES / name).read_text())


def server(prefix: str = "uid") -> ApplyContext:
    counter = itertools.count(1)
    return ApplyContext(now=NOW, new_uid=lambda: f"{prefix}-{next(counter)}", request_id="req")


def test_a_create_only_apply_leaves_an_object_that_exists_as_it_is():
    docs = example("02-dra.yaml")[:2]
    view = AdmissionView()
    admit_batch(prepare_batch(docs[:1]), view, server())
    changed = [dict(docs[0], spec={**docs[0]["spec"], "extendedResourceName": "example.com/gpu"}), docs[1]]

    decision = admit_batch(prepare_batch(changed, create_only=True), view, server("later"))

    assert [(r.name, r.outcome) for r in decision.results] == [
        ("gpu.example.com", "unchanged"),
        ("fabric.example.com", "created"),
    ]
    stored = view.get(("DeviceClass", "", "gpu.example.com"))
    assert stored.manifest["spec"]["extendedResourceName"] == "nvidia.com/gpu"
