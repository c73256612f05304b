"""Patches applied as kube-apiserver applies them, and the Status each refusal is answered with."""

from __future__ import annotations

import json

import pytest

from libs.kubeapi.patches import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchError,
    apply_patch,
    decode_apply,
)

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web", "tier": "gpu"}, "finalizers": ["a", "b"]},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "app:1",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            },
            {"name": "side", "image": "side:1"},
        ],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
    "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]
    },
}


def patched(content_type: str, patch, kind: str = "Pod", live=None) -> dict:
    return apply_patch(content_type, live or POD, json.dumps(patch), kind)


def refusal(content_type: str, body: str, kind: str = "Pod") -> PatchError:
    with pytest.raises(PatchError) as refused:
        apply_patch(content_type, POD, body, kind)
    return refused.value


# ---------------------------------------------------------------- JSON patch


def test_json_patch_operations_and_pointer_escaping():
    ops = [
        {"op": "add", "path": "/metadata/labels/example.com~1role", "value": "x"},
        {"op": "add", "path": "/metadata/labels/a~0b", "value": "y"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"},
        {"op": "remove", "path": "/metadata/labels/tier"},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "c"},
        {"op": "copy", "from": "/metadata/labels/app", "path": "/metadata/labels/copied"},
        {"op": "move", "from": "/metadata/labels/copied", "path": "/metadata/labels/moved"},
        {"op": "test", "path": "/spec/containers/1/name", "value": "side"},
    ]
    result = patched(JSON_PATCH, ops)
    assert result["metadata"]["labels"] == {"app": "web", "example.com/role": "x", "a~b": "y", "moved": "web"}
    assert result["spec"]["containers"][0]["image"] == "app:2"
    assert result["metadata"]["finalizers"] == ["a", "b", "c"]
    assert POD["metadata"]["labels"] == {"app": "web", "tier": "gpu"}  # the live object is untouched


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/metadata/name", "value": "other"}],
        [{"op": "replace", "path": "/spec/foo", "value": 1}],
        [{"op": "remove", "path": "/metadata/labels/missing"}],
        [{"op": "add", "path": "/spec/missing/deeper", "value": 1}],
        [{"op": "frobnicate", "path": "/spec"}],
    ],
)
def test_a_json_patch_that_does_not_apply_is_422_with_the_generic_message(ops):
    error = refusal(JSON_PATCH, json.dumps(ops))
    assert error.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }
    assert error.detail


def test_a_missing_value_tests_equal_to_null():
    assert (
        patched(JSON_PATCH, [{"op": "test", "path": "/spec/nothing", "value": None}])["metadata"]["name"]
        == "web"
    )


def test_a_malformed_json_patch_is_400():
    assert refusal(JSON_PATCH, '{"op": "add"}').status["message"] == (
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
    )
    assert refusal(JSON_PATCH, "[oops").code == 400


def test_too_many_operations_is_413():
    body = json.dumps([{"op": "test", "path": "/kind", "value": "Pod"}] * 10001)
    assert refusal(JSON_PATCH, body).status["message"] == (
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    )


def test_an_unknown_content_type_is_415_listing_the_patch_types():
    error = refusal("application/xml", "{}")
    assert error.code == 415
    assert error.status["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, "
        "application/apply-patch+yaml"
    )


def test_the_charset_parameter_is_ignored():
    result = apply_patch(
        "application/merge-patch+json; charset=utf-8", POD, '{"metadata":{"labels":{"x":"1"}}}'
    )
    assert result["metadata"]["labels"]["x"] == "1"


# ---------------------------------------------------------------- merge patch


def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists():
    result = patched(
        MERGE_PATCH,
        {"metadata": {"labels": {"tier": None, "new": "1"}}, "spec": {"containers": [{"name": "only"}]}},
    )
    assert result["metadata"]["labels"] == {"app": "web", "new": "1"}
    assert result["spec"]["containers"] == [{"name": "only"}]


def test_a_merge_patch_leaves_the_object_and_the_patch_as_they_were():
    live = json.loads(json.dumps(POD))
    patch = {"metadata": {"labels": {"tier": None, "deep": {"a": [1]}}}, "spec": {"hostname": {"x": {}}}}
    sent = json.loads(json.dumps(patch))
    result = apply_patch(MERGE_PATCH, live, json.dumps(patch), "Pod")

    assert live == POD
    assert patch == sent
    assert result["metadata"]["labels"] == {"app": "web", "deep": {"a": [1]}}
    assert result["spec"]["hostname"] == {"x": {}}  # a map merged into what was not one
    result["metadata"]["labels"]["app"] = "changed"
    result["spec"]["containers"][0]["env"].append({"name": "C"})
    assert live == POD  # the result shares nothing with the object


def test_a_malformed_merge_patch_is_400_invalid_json_patch():
    assert refusal(MERGE_PATCH, "{nope").status["message"] == "Invalid JSON Patch"


def test_a_merge_patch_that_is_not_an_object_is_invalid():
    assert refusal(MERGE_PATCH, "[1]").code == 422


# ---------------------------------------------------------------- strategic merge patch


def test_containers_merge_by_name_and_env_by_name():
    result = patched(
        STRATEGIC_MERGE_PATCH,
        {"spec": {"containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}]}]}},
    )
    app, side = result["spec"]["containers"]
    assert app["image"] == "app:2"
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert side == {"name": "side", "image": "side:1"}


def test_tolerations_have_no_merge_key_and_are_replaced():
    result = patched(
        STRATEGIC_MERGE_PATCH, {"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}}
    )
    assert result["spec"]["tolerations"] == [{"key": "other", "operator": "Exists"}]


def test_conditions_merge_by_type():
    result = patched(STRATEGIC_MERGE_PATCH, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert result["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_delete_and_replace_directives_in_lists_and_maps():
    result = patched(
        STRATEGIC_MERGE_PATCH,
        {
            "metadata": {"labels": {"$patch": "replace", "only": "this"}},
            "spec": {"containers": [{"name": "side", "$patch": "delete"}]},
        },
    )
    assert result["metadata"]["labels"] == {"only": "this"}
    assert [c["name"] for c in result["spec"]["containers"]] == ["app"]
    replaced = patched(
        STRATEGIC_MERGE_PATCH,
        {"spec": {"containers": [{"$patch": "replace"}, {"name": "new", "image": "n"}]}},
    )
    assert replaced["spec"]["containers"] == [{"name": "new", "image": "n"}]


def test_null_deletes_and_delete_from_primitive_list():
    result = patched(
        STRATEGIC_MERGE_PATCH,
        {"metadata": {"labels": {"tier": None}, "$deleteFromPrimitiveList/finalizers": ["a"]}},
    )
    assert result["metadata"]["labels"] == {"app": "web"}
    assert result["metadata"]["finalizers"] == ["b"]


def test_set_element_order_reorders_the_merged_list():
    result = patched(
        STRATEGIC_MERGE_PATCH,
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "app:3"}],
            }
        },
    )
    assert [c["name"] for c in result["spec"]["containers"]] == ["side", "app"]
    assert result["spec"]["containers"][1]["image"] == "app:3"


def test_retain_keys_clears_the_other_members_of_a_union():
    result = patched(
        STRATEGIC_MERGE_PATCH,
        {
            "spec": {
                "volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}]
            }
        },
    )
    assert result["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/d"}}]
    error = refusal(
        STRATEGIC_MERGE_PATCH,
        json.dumps(
            {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name"], "hostPath": {"path": "/d"}}]}}
        ),
    )
    assert error.code == 422


def test_job_templates_merge_like_pods_and_node_taints_are_replaced():
    job = {
        "kind": "Job",
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}]}}},
    }
    result = patched(
        STRATEGIC_MERGE_PATCH,
        {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "2"}]}}}},
        "Job",
        job,
    )
    assert result["spec"]["template"]["spec"]["containers"] == [{"name": "a", "image": "2"}, {"name": "b"}]
    node = {"kind": "Node", "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    result = patched(
        STRATEGIC_MERGE_PATCH, {"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}}, "Node", node
    )
    assert result["spec"]["taints"] == [{"key": "b", "effect": "NoSchedule"}]


def test_strategic_merge_patch_errors():
    assert refusal(STRATEGIC_MERGE_PATCH, "[1]").status["message"] == (
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    )
    error = refusal(STRATEGIC_MERGE_PATCH, json.dumps({"spec": {"containers": [{"image": "x"}]}}))
    assert (error.code, "reason" in error.status) == (500, False)
    assert error.status["message"] == "map: map[image:x] does not contain declared merge key: name"
    error = refusal(
        STRATEGIC_MERGE_PATCH, json.dumps({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}})
    )
    assert error.status["message"] == "invalid patch format of primitive list"
    assert refusal(STRATEGIC_MERGE_PATCH, json.dumps({"spec": {"$patch": "bogus"}})).code == 500


def test_apply_bodies_are_yaml():
    assert decode_apply("kind: Pod\nmetadata: {name: a}\n") == {"kind": "Pod", "metadata": {"name": "a"}}
    with pytest.raises(PatchError) as refused:
        decode_apply("- a\n")
    assert refused.value.code == 400
