"""Podway annotations (podway.io/*): validated wherever they appear, read with typed helpers."""

from __future__ import annotations

import pytest

from libs.api import annotations as podway
from libs.api.manifests import validate_document
from tests.unit.api.builders import error_lines, make_job, make_workload

ANNOTATIONS = "metadata.annotations"


def with_annotations(**annotations: str) -> dict:
    doc = make_workload()
    doc["metadata"]["annotations"] = {
        f"podway.io/{key.replace('_', '-')}": value for key, value in annotations.items()
    }
    return doc


def test_valid_podway_annotations_are_accepted():
    doc = with_annotations(
        topology_preferred="topology.example.com/rack,topology.example.com/block",
        topology_key="topology.example.com/block",
        max_pending_seconds="600",
        gang_restart="Never",
    )
    assert error_lines(doc) == []


def test_topology_preferred_is_a_comma_list_of_label_keys():
    lines = error_lines(with_annotations(topology_preferred="topology.example.com/rack,,bad key"))
    assert lines[0] == (
        f'{ANNOTATIONS}[podway.io/topology-preferred]: Invalid value: "": name part must be non-empty'
    )
    assert lines[2].startswith(
        f'{ANNOTATIONS}[podway.io/topology-preferred]: Invalid value: "bad key": name part'
    )


def test_topology_key_is_a_label_key():
    assert error_lines(with_annotations(topology_key="a/b/c"))[0].startswith(
        f'{ANNOTATIONS}[podway.io/topology-key]: Invalid value: "a/b/c": a valid label key must consist of'
    )


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "soon"])
def test_max_pending_seconds_is_a_positive_integer(value):
    assert error_lines(with_annotations(max_pending_seconds=value)) == [
        f'{ANNOTATIONS}[podway.io/max-pending-seconds]: Invalid value: "{value}": must be a positive integer'
    ]


def test_gang_restart_is_always_or_never():
    assert error_lines(with_annotations(gang_restart="Sometimes")) == [
        f'{ANNOTATIONS}[podway.io/gang-restart]: Unsupported value: "Sometimes": supported values: "Always", "Never"'
    ]


def test_annotations_on_a_job_are_validated_too():
    assert error_lines(make_job(annotations={"podway.io/gang-restart": "Maybe"})) == [
        f'{ANNOTATIONS}[podway.io/gang-restart]: Unsupported value: "Maybe": supported values: "Always", "Never"'
    ]


def test_unknown_podway_annotations_are_warned_about():
    result = validate_document(with_annotations(gang_restrat="Never"))
    assert result.ok
    assert result.warnings == ('unknown Podway annotation "podway.io/gang-restrat"',)


def test_readers_return_typed_values():
    annotations = {
        podway.TOPOLOGY_PREFERRED: "a/rack,a/block",
        podway.TOPOLOGY_KEY: "a/zone",
        podway.MAX_PENDING_SECONDS: "600",
        podway.RUN_SECONDS: "12.5",
    }
    assert podway.topology_preferred(annotations) == ["a/rack", "a/block"]
    assert podway.topology_key(annotations) == "a/zone"
    assert podway.max_pending_seconds(annotations) == 600
    assert podway.run_seconds(annotations) == 12.5
    assert podway.max_pending_seconds({}) is None
    assert podway.topology_preferred({}) == []


def test_gang_restart_defaults_to_always_only_for_job_owned_gangs():
    assert podway.gang_restart({}, job_owned=True) == "Always"
    assert podway.gang_restart({}, job_owned=False) == "Never"
    assert podway.gang_restart({podway.GANG_RESTART: "Never"}, job_owned=True) == "Never"


def test_the_most_specific_layer_wins():
    pod_group = {podway.MAX_PENDING_SECONDS: "60", "other": "x"}
    workload = {podway.MAX_PENDING_SECONDS: "600", podway.TOPOLOGY_PREFERRED: "a/rack"}
    job = {podway.GANG_RESTART: "Never"}
    assert podway.effective_annotations(pod_group, workload, job) == {
        podway.MAX_PENDING_SECONDS: "60",
        podway.TOPOLOGY_PREFERRED: "a/rack",
        podway.GANG_RESTART: "Never",
    }
