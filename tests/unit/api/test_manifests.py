"""Reading manifests: YAML documents, kinds, decoding errors, warnings and the apply order."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from libs.api.manifests import (
    KIND_ORDER,
    InvalidObjectError,
    ManifestError,
    decode_manifest,
    is_namespaced,
    load_documents,
    object_key,
    parse_object,
    sort_for_apply,
    validate_document,
)
from libs.api.models import Node, Pod, PodGroup, Workload
from tests.unit.api.builders import make_node, make_pod, make_pod_group, make_priority_class, make_workload


def test_load_documents_skips_empty_documents_and_expands_lists():
    text = textwrap.dedent(
        """\
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: a}
        ---
        # only a comment
        ---
        apiVersion: v1
        kind: List
        items:
        - {apiVersion: v1, kind: Node, metadata: {name: b}}
        - {apiVersion: v1, kind: Node, metadata: {name: c}}
        """
    )
    assert [doc["metadata"]["name"] for doc in load_documents(text)] == ["a", "b", "c"]


def test_load_documents_reports_bad_yaml_and_non_objects():
    with pytest.raises(ManifestError, match="error converting YAML to JSON: yaml: "):
        load_documents("a: [")
    with pytest.raises(ManifestError, match="document 1 is not an object"):
        load_documents("- 1\n- 2\n")


def test_parse_object_picks_the_model_by_api_version_and_kind():
    assert isinstance(parse_object(make_workload()), Workload)
    assert isinstance(parse_object(make_pod_group()), PodGroup)
    assert isinstance(parse_object(make_pod()), Pod)


def test_unknown_kind_or_version_is_a_clear_error():
    with pytest.raises(ManifestError) as caught:
        parse_object(
            {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "x"}}
        )
    assert str(caught.value) == 'no matches for kind "Workload" in version "scheduling.k8s.io/v1beta1"'
    assert caught.value.status()["reason"] == "BadRequest"


def test_missing_kind_is_reported_as_the_api_server_does():
    with pytest.raises(ManifestError) as caught:
        parse_object({"apiVersion": "v1", "metadata": {"name": "x"}})
    assert (
        str(caught.value) == """Object 'Kind' is missing in '{"apiVersion":"v1","metadata":{"name":"x"}}'"""
    )


def test_wrong_json_types_are_field_errors():
    doc = make_workload()
    doc["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = "16"
    with pytest.raises(InvalidObjectError) as caught:
        parse_object(doc)
    assert [str(error) for error in caught.value.errors] == [
        'spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Invalid value: "16": must be an integer'
    ]
    assert caught.value.status()["code"] == 422


def test_validate_document_answers_unreadable_documents_with_the_problem():
    result = validate_document({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}})
    assert not result.ok
    assert result.message == 'no matches for kind "Secret" in version "v1"'
    assert result.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'no matches for kind "Secret" in version "v1"',
        "reason": "BadRequest",
        "code": 400,
    }


def test_validate_document_reports_decoding_errors_with_the_object_name():
    doc = make_pod()
    doc["spec"]["containers"] = "trainer"
    result = validate_document(doc)
    assert result.message == (
        'The Pod "llm-train-worker-0-3" is invalid:\n* spec.containers: Invalid value: "trainer": must be a list'
    )
    assert result.status_code == 422


def test_explicit_nulls_are_accepted_for_optional_fields():
    doc = make_workload(controllerRef=None)
    doc["metadata"].update(labels=None, annotations=None, ownerReferences=None)
    doc["spec"]["podGroupTemplates"][0].update(resourceClaims=None, schedulingConstraints=None, priority=None)
    result = validate_document(doc)
    assert result.ok, result.message


def test_unknown_fields_are_warned_about_and_dropped_as_the_api_server_drops_them():
    doc = make_workload()
    doc["spec"]["podGroupTemplates"][0]["minCont"] = 3
    doc["spec"]["podGroupTemplates"][0]["gangg"] = {"minCount": 2}
    result = validate_document(doc)
    assert result.ok
    assert result.warnings == (
        'unknown field "spec.podGroupTemplates[0].minCont"',
        'unknown field "spec.podGroupTemplates[0].gangg"',
    )
    template = result.obj.to_wire()["spec"]["podGroupTemplates"][0]
    assert "minCont" not in template
    assert "gangg" not in template
    assert doc["spec"]["podGroupTemplates"][0]["minCont"] == 3  # the document given is left as it was


def test_a_manager_no_longer_owns_the_unknown_fields_dropped():
    doc = make_workload()
    template = doc["spec"]["podGroupTemplates"][0]
    template["minCont"] = 3
    name = json.dumps({"name": template["name"]}, separators=(",", ":"))
    mine = {
        "f:metadata": {"f:labels": {".": {}, "f:team": {}}},
        "f:spec": {"f:podGroupTemplates": {f"k:{name}": {".": {}, "f:minCont": {}, "f:name": {}}}},
    }
    typo = {"f:spec": {"f:podGroupTemplates": {f"k:{name}": {"f:minCont": {}}}}}
    doc["metadata"]["labels"] = {"team": "llm"}
    doc["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": mine},
        {"manager": "typo", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": typo},
    ]
    result = validate_document(doc)
    assert result.ok
    (entry,) = result.obj.to_wire()["metadata"]["managedFields"]  # the one that owned only the typo is gone
    assert entry["manager"] == "kubectl"
    assert entry["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:team": {}}},
        "f:spec": {"f:podGroupTemplates": {f"k:{name}": {".": {}, "f:name": {}}}},
    }
    assert doc["metadata"]["managedFields"][0]["fieldsV1"] is mine  # the document given is as it was
    assert "f:minCont" in mine["f:spec"]["f:podGroupTemplates"][f"k:{name}"]


def test_unknown_fields_ignored_are_dropped_without_a_word():
    doc = make_workload()
    doc["spec"]["podGroupTemplates"][0]["minCont"] = 3
    result = validate_document(doc, field_validation="Ignore")
    assert result.ok
    assert result.warnings == ()
    assert "minCont" not in result.obj.to_wire()["spec"]["podGroupTemplates"][0]


def test_unknown_but_valid_kubernetes_fields_pass_through_pods_silently():
    doc = make_pod(affinity={"nodeAffinity": {}}, volumes=[{"name": "data", "emptyDir": {}}])
    doc["spec"]["containers"][0]["command"] = ["python", "train.py"]
    result = validate_document(doc)
    assert result.ok
    assert result.warnings == ()
    wire = result.obj.to_wire()
    assert wire["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert wire["spec"]["containers"][0]["command"] == ["python", "train.py"]


def test_apply_order_puts_dependencies_first():
    assert KIND_ORDER == (
        "Namespace",
        "PriorityClass",
        "DeviceClass",
        "Node",
        "ResourceSlice",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "Workload",
        "CompositePodGroup",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "PodGroup",
        "Job",
        "Pod",
    )
    objects = [
        parse_object(doc) for doc in (make_pod(), make_pod_group(), make_workload(), make_priority_class())
    ]
    assert [obj.kind for obj in sort_for_apply(objects)] == ["PriorityClass", "Workload", "PodGroup", "Pod"]


def test_object_keys_and_scope():
    assert object_key(parse_object(make_pod())) == ("Pod", "ml", "llm-train-worker-0-3")
    assert object_key(parse_object(make_node())) == ("Node", None, "node-a")
    assert is_namespaced("PodGroup")
    assert not is_namespaced("ResourceSlice")


def test_documents_round_trip_through_the_models():
    for doc in (make_workload(), make_pod_group(), make_priority_class(), make_node(unschedulable=True)):
        assert parse_object(doc).to_wire() == doc


def test_a_yaml_file_with_several_kinds_validates_document_by_document():
    text = yaml.safe_dump_all([make_priority_class(), make_workload(), make_pod_group(), make_pod()])
    results = [validate_document(doc) for doc in load_documents(text)]
    assert [(r.kind, r.ok) for r in results] == [
        ("PriorityClass", True),
        ("Workload", True),
        ("PodGroup", True),
        ("Pod", True),
    ]


def test_generate_name_stands_in_for_a_name():
    doc = make_node()
    doc["metadata"] = {"generateName": "node-"}
    assert validate_document(doc).ok
    assert isinstance(parse_object(doc), Node)


def test_only_one_owner_reference_may_be_the_controller():
    doc = make_pod()
    refs = [{"apiVersion": "batch/v1", "kind": "Job", "name": n, "uid": n, "controller": True} for n in "ab"]
    doc["metadata"]["ownerReferences"] = refs + [{"apiVersion": "", "kind": "", "name": ""}]
    lines = [str(error) for error in validate_document(doc).errors]
    assert lines[0].startswith("metadata.ownerReferences: Invalid value: [")
    assert lines[0].endswith(
        'Only one reference can have Controller set to true. Found "true" in references for a and b'
    )
    assert lines[1:] == [
        'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
        'metadata.ownerReferences.kind: Invalid value: "": kind must not be empty',
        'metadata.ownerReferences.name: Invalid value: "": name must not be empty',
    ]


def test_validating_converted_documents_leaves_them_as_they_were_and_decides_the_same() -> None:
    import copy
    from pathlib import Path

    from libs.api.conversion import convert_documents
    from libs.api.manifests import load_documents

    examples = Path(__file__).resolve().parents[3] / "deploy" / "examples"
    docs = [d for f in sorted(examples.glob("*.yaml")) for d in load_documents(f.read_text())]
    converted, _ = convert_documents(docs)

    for doc in converted:
        before = copy.deepcopy(doc)
        fast = validate_document(doc, converted=True)
        again = validate_document(doc, converted=True)  # as a retried group commit does
        slow = validate_document(copy.deepcopy(before))
        assert doc == before
        assert (
            (fast.obj and fast.obj.to_wire())
            == (slow.obj and slow.obj.to_wire())
            == (again.obj and again.obj.to_wire())
        )
        assert fast.problem == slow.problem


def test_a_key_set_twice_in_one_mapping_is_refused_with_its_line_as_kubectl_words_it():
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {}\nmetadata: {name: b}\n"

    with pytest.raises(ManifestError) as refused:
        load_documents(text)

    assert str(refused.value) == (
        'error converting YAML to JSON: yaml: unmarshal errors:\n  line 5: key "metadata" already set in map'
    )


def test_every_key_set_twice_in_a_document_is_listed_nested_ones_included():
    text = "kind: Pod\nmetadata:\n  name: a\n  name: b\nspec: {}\nspec: {}\n"

    with pytest.raises(ManifestError) as refused:
        load_documents(text)

    assert str(refused.value).splitlines()[1:] == [
        '  line 4: key "name" already set in map',
        '  line 6: key "spec" already set in map',
    ]


def test_yaml_merge_keys_are_not_duplicates():
    text = "base: &b {cpu: '1'}\nrequests:\n  <<: *b\n  memory: 1Gi\n"
    assert load_documents(text) == [{"base": {"cpu": "1"}, "requests": {"cpu": "1", "memory": "1Gi"}}]


def test_bytes_that_are_not_utf8_are_refused_naming_the_offset_of_the_first_bad_byte():
    data = b"kind: Pod\nmetadata: {name: caf\xe9}\n"  # Latin-1, not UTF-8: the bad byte is at 30

    with pytest.raises(ManifestError) as refused:
        decode_manifest(data)

    assert str(refused.value) == "invalid UTF-8 at byte 30"


def test_a_file_of_comments_only_has_no_documents():
    assert load_documents("# nothing here\n---\n# nor here\n") == []
