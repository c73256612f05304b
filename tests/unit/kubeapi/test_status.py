"""Each Status builder answers in the API server's exact words (k8s.io/apimachinery/pkg/api/errors,
apiserver handlers/negotiation and responsewriters)."""

from __future__ import annotations

from libs.api.errors import FieldPath, required
from libs.kubeapi import status


def head(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }


def test_not_found_names_the_qualified_resource():
    assert status.not_found("pods", "", "web") == {
        **head(404, "NotFound", 'pods "web" not found'),
        "details": {"name": "web", "kind": "pods"},
        "code": 404,
    }
    assert status.not_found("jobs", "batch", "train")["message"] == 'jobs.batch "train" not found'
    assert status.not_found("jobs", "batch", "train")["details"] == {
        "name": "train",
        "group": "batch",
        "kind": "jobs",
    }


def test_already_exists():
    assert status.already_exists("podgroups", "scheduling.k8s.io", "g") == {
        **head(409, "AlreadyExists", 'podgroups.scheduling.k8s.io "g" already exists'),
        "details": {"name": "g", "group": "scheduling.k8s.io", "kind": "podgroups"},
        "code": 409,
    }


def test_conflict_on_a_stale_write():
    answer = status.conflict("Pod", "web")
    assert answer["message"] == (
        'Operation cannot be fulfilled on pods "web": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert (answer["reason"], answer["code"]) == ("Conflict", 409)


def test_invalid_reuses_the_field_errors():
    answer = status.invalid("Pod", "web", [required(FieldPath("spec.containers"))])
    assert answer["message"] == 'Pod "web" is invalid: spec.containers: Required value'
    assert (answer["reason"], answer["code"]) == ("Invalid", 422)


def test_a_json_patch_that_does_not_apply():
    assert status.invalid_patch() == {
        **head(422, "Invalid", "the server rejected our request due to an error in our request"),
        "details": {},
        "code": 422,
    }


def test_method_not_allowed():
    assert status.method_not_allowed("events", "", "create") == {
        **head(405, "MethodNotAllowed", 'create is not supported on resources of kind "events"'),
        "details": {"kind": "events"},
        "code": 405,
    }


def test_media_type_negotiation():
    accepted = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
    assert status.unsupported_media_type(accepted) == {
        **head(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ),
        "code": 415,
    }
    assert status.not_acceptable(["application/json", "application/yaml"]) == {
        **head(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml",
        ),
        "code": 406,
    }


def test_expired_and_gone():
    assert status.expired(5, 12) == {**head(410, "Expired", "too old resource version: 5 (12)"), "code": 410}
    assert status.gone("gone away")["reason"] == "Gone"


def test_request_entity_too_large():
    answer = status.request_entity_too_large("limit is 3145728")
    assert answer == {
        **head(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"),
        "code": 413,
    }


def test_unauthorized():
    assert status.unauthorized() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_forbidden_in_a_namespace_and_at_the_cluster_scope():
    assert status.forbidden("viewer", "create", "pods", "", "default") == {
        **head(
            403,
            "Forbidden",
            'pods is forbidden: User "viewer" cannot create resource "pods" in API group "" in the namespace "default"',
        ),
        "details": {"kind": "pods"},
        "code": 403,
    }
    named = status.forbidden("viewer", "delete", "nodes", "", name="n1")
    assert named["message"] == (
        'nodes "n1" is forbidden: User "viewer" cannot delete resource "nodes" in API group "" at the cluster scope'
    )
    assert named["details"] == {"name": "n1", "kind": "nodes"}
    sub = status.forbidden("viewer", "patch", "jobs", "batch", "ml", "train", "status")
    assert sub["message"] == (
        'jobs.batch "train" is forbidden: User "viewer" cannot patch resource "jobs/status" '
        'in API group "batch" in the namespace "ml"'
    )


def test_bad_request_internal_and_unknown():
    assert status.bad_request("error decoding patch: x")["reason"] == "BadRequest"
    assert status.internal_error("boom")["code"] == 500
    unknown = {key: value for key, value in head(500, "", "boom").items() if key != "reason"}
    assert status.unknown_error("boom") == {**unknown, "code": 500}


def test_an_apply_conflict_carries_its_causes():
    cause = {"reason": "FieldManagerConflict", "message": 'conflict with "m"', "field": ".spec.replicas"}
    answer = status.apply_conflict('Apply failed with 1 conflict: conflict with "m": .spec.replicas', [cause])
    assert answer["details"] == {"causes": [cause]}
    assert (answer["reason"], answer["code"]) == ("Conflict", 409)
