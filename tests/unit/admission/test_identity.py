"""The server owns identity: it assigns the uid of every new object, and what a Job generates derives its
uid from the Job's, so each incarnation of a Job is a new identity for its children."""

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


def generated_uids(view: AdmissionView) -> dict[tuple[str, str], str]:
    return {
        (o.kind, o.name): o.uid for o in view.objects.values() if o.kind in ("Workload", "PodGroup", "Pod")
    }


def test_the_server_assigns_the_uid_of_a_new_object_and_ignores_one_in_the_request():
    (priority_class, _) = example("01-priorityclasses.yaml")
    priority_class["metadata"]["uid"] = "chosen-by-the-client"
    view = AdmissionView()

    decision = admit_batch(prepare_batch([priority_class]), view, server())

    assert decision.results[0].uid == "uid-1"
    assert decision.writes[0].uid == "uid-1"
    assert view.get(("PriorityClass", "", "high-priority")).manifest["metadata"]["uid"] == "uid-1"


def test_an_update_keeps_the_stored_uid_whatever_the_request_says():
    docs = example("01-priorityclasses.yaml")
    view = AdmissionView()
    admit_batch(prepare_batch(docs), view, server())
    docs[0]["metadata"]["uid"] = "another"
    docs[0]["metadata"]["labels"] = {"team": "ml"}

    decision = admit_batch(prepare_batch(docs[:1]), view, server("later"))

    assert (decision.results[0].outcome, decision.results[0].uid) == ("updated", "uid-1")


def test_a_jobs_children_derive_their_uids_from_the_jobs_so_a_new_incarnation_is_a_new_identity():
    docs = example("01-priorityclasses.yaml") + example("05-indexed-job.yaml")
    first, second = AdmissionView(), AdmissionView()

    admit_batch(prepare_batch(docs), first, server("first"))
    admit_batch(prepare_batch(docs), second, server("second"))

    one, two = generated_uids(first), generated_uids(second)
    assert one.keys() == two.keys()
    assert len(one) == 10
    assert set(one.values()).isdisjoint(two.values())
    job = first.get(("Job", "ml", "finetune"))
    pod = first.get(("Pod", "ml", "finetune-worker-0-3"))
    assert pod.manifest["metadata"]["ownerReferences"][0]["uid"] == job.uid
    assert pod.manifest["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == job.uid
