"""Unknown fields, as the API server's `fieldValidation` treats them: Strict refuses the object naming every
unknown field path, Warn admits it with one warning per field, Ignore admits it silently. Known fields are
those Podway's models declare or pass through (the v1.36 upstream fields they carry without reading)."""

from __future__ import annotations

from typing import Any

import pytest

from libs.api.manifests import validate_document
from tests.unit.api.builders import (
    make_claim_template,
    make_container,
    make_device,
    make_device_class,
    make_job,
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
    make_slice,
    make_workload,
)


def misspelt_job() -> dict[str, Any]:
    job = make_job(parallelism=None)
    job["spec"]["paralelism"] = 4
    return job


def test_a_misspelt_job_field_is_refused_in_strict_with_the_api_servers_words():
    result = validate_document(misspelt_job(), field_validation="Strict")

    assert not result.ok
    assert result.message == (
        'Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field "spec.paralelism"'
    )
    assert (result.kind, result.name, result.namespace) == ("Job", "llm-train", "ml")
    assert result.status()["reason"] == "BadRequest"


def test_strict_lists_every_unknown_field_path_comma_separated_nested_ones_included():
    job = misspelt_job()
    job["spec"]["template"]["spec"]["containers"] = [make_container(requets={"cpu": "1"})]
    job["spec"]["template"]["spec"]["nodeSelectr"] = {"zone": "a"}

    result = validate_document(job, field_validation="Strict")

    assert result.message.endswith(
        'strict decoding error: unknown field "spec.paralelism", '
        'unknown field "spec.template.spec.nodeSelectr", '
        'unknown field "spec.template.spec.containers[0].resources.requets"'
    )


def test_warn_admits_the_object_with_a_warning_per_unknown_field():
    result = validate_document(misspelt_job(), field_validation="Warn")

    assert result.ok
    assert result.warnings == ('unknown field "spec.paralelism"',)


def test_ignore_admits_the_object_silently():
    result = validate_document(misspelt_job(), field_validation="Ignore")

    assert result.ok
    assert result.warnings == ()


def test_upstream_fields_podway_does_not_read_are_known_in_strict():
    pod = make_pod(
        affinity={"nodeAffinity": {}},
        volumes=[{"name": "data", "emptyDir": {}}],
        terminationGracePeriodSeconds=30,
    )
    pod["metadata"].update(selfLink="/x", managedFields=[], deletionGracePeriodSeconds=None)
    pod["spec"]["containers"][0].update(command=["python"], env=[{"name": "A", "value": "1"}], ports=[])
    job = make_job()
    job["spec"].update(backoffLimitPerIndex=1, ttlSecondsAfterFinished=60, podFailurePolicy={"rules": []})
    node = make_node(podCIDR="10.0.0.0/24")
    node["status"]["nodeInfo"] = {"kernelVersion": "6.1"}

    for doc in (pod, job, node):
        result = validate_document(doc, field_validation="Strict")
        assert result.ok, result.message
        assert result.warnings == ()


def _claim() -> dict[str, Any]:
    template = make_claim_template()
    return {**template, "kind": "ResourceClaim", "spec": template["spec"]["spec"]}


def _with(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    at = doc
    for part in path[:-1]:
        at = at[part]
    at[path[-1]] = 1
    return doc


UNKNOWN_IN_EVERY_KIND = [
    (
        _with(make_pod(), "spec", "containers", 0, "resources", "requets"),
        "spec.containers[0].resources.requets",
    ),
    (_with(make_job(), "spec", "template", "spec", "restartPolcy"), "spec.template.spec.restartPolcy"),
    (_with(make_workload(), "spec", "podGroupTemplates", 0, "minCont"), "spec.podGroupTemplates[0].minCont"),
    (
        _with(make_pod_group(), "spec", "schedulingPolicy", "gang", "maxCount"),
        "spec.schedulingPolicy.gang.maxCount",
    ),
    (_with(make_priority_class(), "preemptionPolcy"), "preemptionPolcy"),
    (_with(make_device_class(), "spec", "selectors", 0, "cell"), "spec.selectors[0].cell"),
    (
        _with(_claim(), "spec", "devices", "requests", 0, "exactly", "cout"),
        "spec.devices.requests[0].exactly.cout",
    ),
    (_with(make_claim_template(), "spec", "specc"), "spec.specc"),
    (
        _with(make_slice(devices=[make_device()]), "spec", "devices", 0, "atributes"),
        "spec.devices[0].atributes",
    ),
    (_with(make_node(), "status", "alocatable"), "status.alocatable"),
    (_with(make_pod(), "metadata", "namespce"), "metadata.namespce"),
]


@pytest.mark.parametrize(
    ("doc", "path"), UNKNOWN_IN_EVERY_KIND, ids=lambda v: v if isinstance(v, str) else ""
)
def test_strict_refuses_an_unknown_field_in_every_kind_admission_accepts(doc, path):
    result = validate_document(doc, field_validation="Strict")

    assert not result.ok
    assert result.message.endswith(f'strict decoding error: unknown field "{path}"'), result.message
