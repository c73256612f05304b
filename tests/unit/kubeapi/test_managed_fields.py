"""Server-side apply's field ownership: who owns what, conflicts in upstream's words, forced takeovers,
and fields an applier drops."""

from __future__ import annotations

import pytest

from libs.kubeapi.managed_fields import ApplyConflict, apply_configuration, record_update
from libs.kubeapi.patches import apply_configuration as reexported

NOW = "2026-01-01T00:00:00Z"


def job(parallelism: int = 1, labels: dict | None = None, image: str = "train:1") -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ml",
            "labels": labels if labels is not None else {"app": "t"},
        },
        "spec": {
            "parallelism": parallelism,
            "template": {
                "spec": {"containers": [{"name": "main", "image": image}], "restartPolicy": "Never"}
            },
        },
    }


def created(obj: dict, manager: str = "kubectl-create") -> dict:
    live = dict(obj)
    live["metadata"] = {**obj["metadata"], "managedFields": record_update(None, obj, manager, now=NOW)}
    return live


def test_a_create_records_its_manager_in_fields_v1():
    (entry,) = created(job())["metadata"]["managedFields"]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "time", "fieldsType")} == {
        "manager": "kubectl-create",
        "operation": "Update",
        "apiVersion": "batch/v1",
        "time": NOW,
        "fieldsType": "FieldsV1",
    }
    fields = entry["fieldsV1"]
    assert "f:name" not in fields["f:metadata"]
    assert fields["f:metadata"]["f:labels"] == {".": {}, "f:app": {}}
    assert fields["f:spec"]["f:parallelism"] == {}
    containers = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers == {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}}}


def test_apply_after_create_conflicts_as_upstream():
    live = created(job(parallelism=1))
    with pytest.raises(ApplyConflict) as refused:
        apply_configuration(live, job(parallelism=3), "kubectl", force=False, now=NOW)
    answer = refused.value.status
    assert answer["code"] == 409
    assert answer["reason"] == "Conflict"
    assert answer["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-create" using batch/v1: .spec.parallelism'
    )
    assert answer["details"] == {
        "causes": [
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "kubectl-create" using batch/v1',
                "field": ".spec.parallelism",
            }
        ]
    }


def test_several_conflicts_are_listed_per_manager():
    live = created(job(parallelism=1))
    with pytest.raises(ApplyConflict) as refused:
        apply_configuration(live, job(parallelism=3, image="train:2"), "kubectl", force=False, now=NOW)
    assert refused.value.status["message"] == (
        'Apply failed with 2 conflicts: conflicts with "kubectl-create" using batch/v1:\n'
        "- .spec.parallelism\n"
        '- .spec.template.spec.containers[name="main"].image'
    )


def test_equal_values_are_shared_and_force_takes_fields_over():
    live = created(job(parallelism=1))
    _merged, managed = apply_configuration(live, job(parallelism=1), "kubectl", force=False, now=NOW)
    assert [e["manager"] for e in managed] == ["kubectl-create", "kubectl"]
    forced, managed = reexported(live, job(parallelism=3), "kubectl", force=True, now=NOW)
    assert forced["spec"]["parallelism"] == 3
    creator = next(e for e in managed if e["manager"] == "kubectl-create")
    assert "f:parallelism" not in creator["fieldsV1"]["f:spec"]
    applier = next(e for e in managed if e["manager"] == "kubectl")
    assert applier["operation"] == "Apply"
    assert applier["fieldsV1"]["f:spec"]["f:parallelism"] == {}


def test_fields_an_applier_drops_are_removed_unless_someone_else_owns_them():
    first, _ = apply_configuration(
        None, job(labels={"app": "t", "extra": "1"}), "kubectl", force=False, now=NOW
    )
    second, _ = apply_configuration(first, job(labels={"app": "t"}), "kubectl", force=False, now=NOW)
    assert second["metadata"]["labels"] == {"app": "t"}

    shared = dict(first)
    shared["metadata"] = {
        **first["metadata"],
        "managedFields": [
            *first["metadata"]["managedFields"],
            *record_update(None, {"kind": "Job", "metadata": {"labels": {"extra": "1"}}}, "ops", now=NOW),
        ],
    }
    third, _ = apply_configuration(shared, job(labels={"app": "t"}), "kubectl", force=False, now=NOW)
    assert third["metadata"]["labels"] == {"app": "t", "extra": "1"}


def test_list_items_merge_per_key():
    live, _ = apply_configuration(None, job(), "kubectl", force=False, now=NOW)
    sidecar = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "s:1"}]}}},
    }
    merged, managed = apply_configuration(live, sidecar, "injector", force=False, now=NOW)
    assert [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]] == ["main", "side"]
    assert {e["manager"] for e in managed} == {"kubectl", "injector"}


def test_an_update_takes_the_fields_it_changes():
    live = created(job(parallelism=1))
    after = job(parallelism=5)
    managed = record_update(live, after, "scaler", now=NOW)
    owners = {e["manager"]: e["fieldsV1"] for e in managed}
    assert owners["scaler"] == {"f:spec": {"f:parallelism": {}}}
    assert "f:parallelism" not in owners["kubectl-create"]["f:spec"]


def test_an_update_takes_a_changed_field_of_a_list_item_but_not_the_item():
    live = created(job(image="train:1", labels={"app": "t", "team": "a"}))
    after = job(image="train:2", labels={"app": "t", "team": "a", "new": "x"})
    owners = {e["manager"]: e["fieldsV1"] for e in record_update(live, after, "bumper", now=NOW)}

    mine_containers = owners["bumper"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert mine_containers == {'k:{"name":"main"}': {"f:image": {}}}
    assert owners["bumper"]["f:metadata"] == {"f:labels": {"f:new": {}}}
    theirs = owners["kubectl-create"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert theirs == {'k:{"name":"main"}': {".": {}, "f:name": {}}}
    assert owners["kubectl-create"]["f:metadata"]["f:labels"] == {".": {}, "f:app": {}, "f:team": {}}


def with_managed(obj: dict, managed: list[dict]) -> dict:
    return {**obj, "metadata": {**obj["metadata"], "managedFields": managed}}


def test_an_update_within_its_own_fields_keeps_their_record_and_renews_its_time():
    live = created(job(parallelism=1))
    (before,) = live["metadata"]["managedFields"]

    (entry,) = record_update(live, job(parallelism=4), "kubectl-create", now="2026-01-02T00:00:00Z")

    assert entry["fieldsV1"] is before["fieldsV1"]
    assert entry["time"] == "2026-01-02T00:00:00Z"


def test_an_update_that_adds_or_removes_a_field_rewrites_its_record():
    live = created(job(labels={"app": "t"}))

    (added,) = record_update(live, job(labels={"app": "t", "team": "a"}), "kubectl-create", now=NOW)
    (removed,) = record_update(live, job(labels={}), "kubectl-create", now=NOW)

    assert added["fieldsV1"]["f:metadata"]["f:labels"] == {".": {}, "f:app": {}, "f:team": {}}
    assert removed["fieldsV1"]["f:metadata"] == {"f:labels": {}}


def test_a_manager_the_update_takes_nothing_from_keeps_its_record_as_read():
    live = created(job(parallelism=1))
    scaled = with_managed(job(parallelism=5), record_update(live, job(parallelism=5), "scaler", now=NOW))
    creator_before = next(e for e in scaled["metadata"]["managedFields"] if e["manager"] == "kubectl-create")

    managed = record_update(scaled, job(parallelism=6), "scaler", now=NOW)
    relabelled = record_update(scaled, job(parallelism=5, labels={"app": "u"}), "scaler", now=NOW)

    assert next(e for e in managed if e["manager"] == "kubectl-create") is creator_before
    taken = next(e for e in relabelled if e["manager"] == "kubectl-create")
    assert taken is not creator_before
    assert "f:app" not in taken["fieldsV1"]["f:metadata"]["f:labels"]


def test_managed_fields_a_create_is_sent_with_are_written_in_canonical_form():
    sent = with_managed(
        job(),
        [
            {
                "manager": "m",
                "operation": "Update",
                "apiVersion": "batch/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:parallelism": {}}, "f:metadata": {"f:labels": {"f:app": {}}}},
            }
        ],
    )

    managed = record_update(None, sent, "m", now=NOW)

    assert list(managed[0]["fieldsV1"]) == sorted(managed[0]["fieldsV1"])
