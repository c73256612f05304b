"""Defaulting before validation, as the API server applies it."""

from __future__ import annotations

from libs.api.defaults import apply_defaults
from libs.api.manifests import parse_object
from tests.unit.api.builders import (
    make_claim_template,
    make_container,
    make_job,
    make_pod,
    make_pod_group,
    make_request,
    make_workload,
)


def test_disruption_mode_defaults_to_pod():
    workload = apply_defaults(parse_object(make_workload()))
    pod_group = apply_defaults(parse_object(make_pod_group()))
    assert workload.spec.pod_group_templates[0].disruption_mode == "Pod"
    assert pod_group.spec.disruption_mode == "Pod"


def test_explicit_disruption_mode_is_kept():
    pod_group = apply_defaults(parse_object(make_pod_group(disruptionMode="PodGroup")))
    assert pod_group.spec.disruption_mode == "PodGroup"


def test_defaulting_returns_a_copy():
    original = parse_object(make_pod_group())
    apply_defaults(original)
    assert original.spec.disruption_mode is None


def test_pod_defaults_scheduler_restart_policy_phase_and_requests_from_limits():
    pod = apply_defaults(
        parse_object(make_pod(containers=[make_container(limits={"cpu": "2"}, requests={})]))
    )
    assert pod.spec.scheduler_name == "default-scheduler"
    assert pod.spec.restart_policy == "Always"
    assert pod.status.phase == "Pending"
    assert pod.spec.containers[0].resources.requests == {"cpu": "2"}


def test_job_counts_default_like_the_api_server():
    work_queue = apply_defaults(parse_object(make_job(parallelism=3, completions=None, completion_mode=None)))
    assert (work_queue.spec.parallelism, work_queue.spec.completions) == (3, None)
    single = apply_defaults(parse_object(make_job(parallelism=None, completions=None, completion_mode=None)))
    assert (single.spec.parallelism, single.spec.completions, single.spec.completion_mode) == (
        1,
        1,
        "NonIndexed",
    )


def test_zero_count_means_unset_and_defaults_to_one():
    claim = apply_defaults(parse_object(make_claim_template(requests=[make_request(count=0)])))
    exactly = claim.spec.spec.devices.requests[0].exactly
    assert (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)


def test_all_mode_gets_no_count():
    claim = apply_defaults(parse_object(make_claim_template(requests=[make_request(allocationMode="All")])))
    assert claim.spec.spec.devices.requests[0].exactly.count is None


def test_sub_requests_are_defaulted():
    request = {"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.example.com"}]}
    claim = apply_defaults(parse_object(make_claim_template(requests=[request])))
    sub = claim.spec.spec.devices.requests[0].first_available[0]
    assert (sub.allocation_mode, sub.count) == ("ExactCount", 1)
