"""`podway apply` of Kueue's quota kinds through the admission core: created in dependency order, applied
again unchanged, and a v1beta1 document's errors named in v1beta1's fields."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

from libs.api.manifests import load_documents
from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
from libs.core.admission.model import AdmissionView

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "examples" / "11-two-teams.yaml"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def applied(view: AdmissionView, docs: list[dict]):
    counter = itertools.count(1)
    ctx = ApplyContext(now=NOW, new_uid=lambda: f"uid-{next(counter)}", request_id="req-1")
    return admit_batch(prepare_batch(docs), view, ctx)


def test_the_two_teams_example_is_admitted_whole_and_kept_as_written():
    view = AdmissionView()
    decision = applied(view, load_documents(EXAMPLE.read_text()))
    assert [(r.kind, r.namespace, r.name, r.outcome) for r in decision.results] == [
        ("ResourceFlavor", None, "h200", "created"),
        ("Cohort", None, "research", "created"),
        ("ClusterQueue", None, "team-llm", "created"),
        ("ClusterQueue", None, "team-vision", "created"),
        ("LocalQueue", "llm", "default", "created"),
        ("LocalQueue", "vision", "default", "created"),
    ]
    assert {e.payload.TYPE.value for e in decision.events} == {"object.admitted"}
    stored = view.get(("ClusterQueue", "", "team-vision"))
    assert stored is not None
    gpu = stored.manifest["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "192",
        "borrowingLimit": "320",
        "lendingLimit": "128",
    }


def test_applying_the_example_again_changes_nothing():
    view = AdmissionView()
    docs = load_documents(EXAMPLE.read_text())
    applied(view, docs)
    again = applied(view, docs)
    assert {r.outcome for r in again.results} == {"unchanged"}
    assert again.writes == []


def test_a_v1beta1_cluster_queue_is_refused_in_v1beta1_field_names():
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-c"},
        "spec": {"cohort": "Not_A_Name"},
    }
    decision = applied(AdmissionView(), [doc])
    [result] = decision.results
    assert result.outcome == "rejected"
    assert result.message.splitlines()[1].startswith(
        '* spec.cohort: Invalid value: "Not_A_Name": spec.cohort in body should match'
    )
