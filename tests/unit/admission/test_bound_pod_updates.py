"""A bound pod read back names its node in `spec.nodeName`, though the binding is not part of its stored spec:
writing that manifest back asks for no change of spec, and stores no nodeName."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
from libs.core.admission.model import AdmissionView

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def server() -> ApplyContext:
    counter = itertools.count(1)
    return ApplyContext(now=NOW, new_uid=lambda: f"uid-{next(counter)}", request_id="req")


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "x"}], **spec},
    }


def bound_view() -> AdmissionView:
    view = AdmissionView()
    admit_batch(prepare_batch([pod()]), view, server())
    stored = view.get(("Pod", "ml", "p"))
    assert stored is not None
    view.nodes_of_pods[stored.uid] = "node-7"
    return view


def test_a_bound_pod_read_back_with_its_node_is_updated_and_its_stored_spec_names_no_node():
    view = bound_view()
    labelled = pod(nodeName="node-7")
    labelled["metadata"]["labels"] = {"seen": "yes"}

    decision = admit_batch(prepare_batch([labelled]), view, server())

    assert [r.outcome for r in decision.results] == ["updated"]
    stored = view.get(("Pod", "ml", "p"))
    assert stored is not None
    assert "nodeName" not in stored.manifest["spec"]
    assert stored.manifest["metadata"]["labels"] == {"seen": "yes"}


def test_naming_another_node_than_the_binding_is_a_forbidden_change():
    view = bound_view()

    decision = admit_batch(prepare_batch([pod(nodeName="node-8")]), view, server())

    assert [r.outcome for r in decision.results] == ["rejected"]
    assert "pod updates may not change fields" in decision.results[0].message


def test_an_unbound_pod_named_a_node_by_an_update_is_refused():
    view = AdmissionView()
    admit_batch(prepare_batch([pod()]), view, server())

    decision = admit_batch(prepare_batch([pod(nodeName="node-7")]), view, server())

    assert [r.outcome for r in decision.results] == ["rejected"]
