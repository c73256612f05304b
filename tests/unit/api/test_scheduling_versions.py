"""scheduling.k8s.io/v1beta1 Workloads and PodGroups: converted to the stored shape and back without loss, in
either direction and through every served version (property-tested), and written through admission as
v1alpha2 ones are."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.api.conversion import convert_document, copy_document
from libs.api.scheduling_versions import as_v1beta1, from_v1beta1
from libs.kubeapi.resources import by_kind
from libs.kubeapi.versions import as_served

NAMES = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
POLICIES = st.one_of(
    st.just({"basic": {}}), st.builds(lambda n: {"gang": {"minCount": n}}, st.integers(1, 64))
)


def _maybe(draw: st.DrawFn, key: str, values: st.SearchStrategy[Any]) -> dict[str, Any]:
    value = draw(st.none() | values)
    return {} if value is None else {key: value}


@st.composite
def group_settings(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "schedulingPolicy": draw(POLICIES),
        **_maybe(
            draw, "schedulingConstraints", st.just({"topology": [{"key": "topology.example.com/rack"}]})
        ),
        **_maybe(draw, "disruptionMode", st.sampled_from(["Pod", "PodGroup"])),
        **_maybe(draw, "priorityClassName", NAMES),
        **_maybe(draw, "priority", st.integers(0, 1000)),
        **_maybe(draw, "preemptionPolicy", st.sampled_from(["Never", "PreemptLowerPriority"])),
    }


@st.composite
def stored_workloads(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": draw(NAMES), "namespace": "ml"},
        "spec": {"podGroupTemplates": [{"name": name, **draw(group_settings())} for name in names]},
    }


SCHEDULED_STATES = st.sampled_from(
    [
        (),  # no cycle yet
        (("PodGroupScheduled", "False"),),  # waits, never scheduled
        (("PodGroupScheduled", "True"), ("PodGroupInitiallyScheduled", "True")),  # placed
        (("PodGroupScheduled", "False"), ("PodGroupInitiallyScheduled", "True")),  # placed once, waits again
        (("PodGroupScheduled", "True"),),  # placed before Podway kept the first True apart
    ]
)
"""The scheduling conditions a stored PodGroup can hold."""
SCHEDULING = frozenset({"PodGroupScheduled", "PodGroupInitiallyScheduled"})


def condition(type_: str, status: str, hour: int) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": "Placed",
        "lastTransitionTime": f"2026-12-01T{hour:02}:00:00Z",
    }


@st.composite
def composite_templates(draw: st.DrawFn, names: list[str], depth: int) -> dict[str, Any]:
    """A composite template named `names.pop()`, its PodGroup templates and (above depth 3) composites."""
    template: dict[str, Any] = {
        "name": names.pop(),
        "schedulingPolicy": draw(
            st.one_of(
                st.just({"basic": {}}), st.builds(lambda n: {"gang": {"minGroupCount": n}}, st.integers(1, 4))
            )
        ),
        **_maybe(draw, "disruptionMode", st.sampled_from([{"single": {}}, {"all": {}}])),
        "podGroupTemplates": [
            {"name": names.pop(), **draw(group_settings())} for _ in range(draw(st.integers(1, 2)))
        ],
    }
    if depth < 3 and draw(st.booleans()):
        template["compositePodGroupTemplates"] = [draw(composite_templates(names, depth + 1))]
    return template


@st.composite
def stored_composite_workloads(draw: st.DrawFn) -> dict[str, Any]:
    names = [f"t{i}" for i in range(12)]
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": draw(NAMES), "namespace": "ml"},
        "spec": {"compositePodGroupTemplates": [draw(composite_templates(names, 2))]},
    }


@st.composite
def stored_pod_groups(draw: st.DrawFn) -> dict[str, Any]:
    ref = {"workload": {"workloadName": draw(NAMES), "podGroupTemplateName": draw(NAMES)}}
    conditions = [condition(t, s, hour) for hour, (t, s) in enumerate(draw(SCHEDULED_STATES))]
    if draw(st.booleans()):
        conditions.append(condition("DisruptionTarget", draw(st.sampled_from(["True", "False"])), 9))
    conditions = draw(st.permutations(conditions))
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": draw(NAMES), "namespace": "ml"},
        "spec": {
            **_maybe(draw, "podGroupTemplateRef", st.just(ref)),
            **_maybe(draw, "parentCompositePodGroupName", NAMES),
            **draw(group_settings()),
        },
        **({"status": {"conditions": conditions}} if conditions else {}),
    }


def but_scheduling(doc: dict[str, Any]) -> dict[str, Any]:
    """The document without its scheduling conditions, which each version shows as it has them."""
    status = doc.get("status")
    if not status:
        return doc
    return {**doc, "status": {"conditions": [c for c in status["conditions"] if c["type"] not in SCHEDULING]}}


def of_type(doc: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [c for c in (doc.get("status") or {}).get("conditions", []) if c["type"] == type_]


@settings(max_examples=300)
@given(st.one_of(stored_workloads(), stored_composite_workloads(), stored_pod_groups()))
def test_stored_shown_as_v1beta1_and_written_back_is_what_was_stored(stored: dict[str, Any]) -> None:
    served = as_v1beta1(stored)

    back, warnings = convert_document(served)

    assert served["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert but_scheduling(back) == but_scheduling(stored)
    assert warnings == []


@settings(max_examples=200)
@given(stored_pod_groups())
def test_v1beta1_shows_the_first_true_once_the_gang_was_scheduled_else_why_it_waits(
    stored: dict[str, Any],
) -> None:
    initially = [c for c in of_type(stored, "PodGroupInitiallyScheduled") if c["status"] == "True"]

    served = as_v1beta1(stored)

    assert of_type(served, "PodGroupScheduled") == []
    if initially:
        assert of_type(served, "PodGroupInitiallyScheduled") == initially
    else:
        renamed = [{**c, "type": "PodGroupInitiallyScheduled"} for c in of_type(stored, "PodGroupScheduled")]
        assert of_type(served, "PodGroupInitiallyScheduled") == renamed


@settings(max_examples=300)
@given(st.one_of(stored_workloads(), stored_composite_workloads(), stored_pod_groups()))
def test_v1beta1_written_and_read_back_is_what_was_written(stored: dict[str, Any]) -> None:
    written = as_v1beta1(stored)

    assert as_v1beta1(from_v1beta1(copy_document(written))[0]) == written


@settings(max_examples=200)
@given(st.one_of(stored_workloads(), stored_composite_workloads()))
def test_a_workload_goes_through_every_served_version_and_comes_back_whole(stored: dict[str, Any]) -> None:
    for version in ("v1alpha1", "v1beta1", "v1alpha3", "v1alpha2"):
        resource = by_kind("Workload", f"scheduling.k8s.io/{version}")
        assert resource is not None
        shown = as_served(resource, stored)
        assert shown["apiVersion"] == f"scheduling.k8s.io/{version}"
        back, _ = convert_document(shown)
        assert back == stored, version


def test_the_v1beta1_shapes_are_upstreams() -> None:
    stored = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "w-0", "namespace": "ml"},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "worker"}},
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "disruptionMode": "PodGroup",
        },
        "status": {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]},
    }

    served = as_v1beta1(stored)

    assert served["spec"] == {
        "workloadRef": {"workloadName": "w", "templateName": "worker"},
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "disruptionMode": {"all": {}},
    }
    assert served["status"]["conditions"] == [{"type": "PodGroupInitiallyScheduled", "status": "True"}]


def test_a_composite_workload_and_a_child_podgroup_keep_their_composite_fields() -> None:
    written = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "job",
                    "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                    "disruptionMode": {"all": {}},
                    "podGroupTemplates": [
                        {"name": "driver", "schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}}
                    ],
                }
            ]
        },
    }
    child = beta_group(parentCompositePodGroupName="job-0")

    stored, warnings = convert_document(written)
    stored_child, _ = convert_document(child)

    assert warnings == []
    composite = stored["spec"]["compositePodGroupTemplates"][0]
    assert composite["disruptionMode"] == {"all": {}}  # a composite's mode is the union in every version
    assert composite["podGroupTemplates"][0]["disruptionMode"] == "PodGroup"
    assert stored_child["spec"]["parentCompositePodGroupName"] == "job-0"
    assert as_v1beta1(stored, "scheduling.k8s.io/v1alpha3") == written


def _refusals(*docs: dict[str, Any]) -> list[str]:
    from datetime import UTC, datetime

    from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
    from libs.core.admission.model import AdmissionView

    context = ApplyContext(now=datetime(2026, 12, 3, tzinfo=UTC), new_uid=lambda: "uid", request_id="r")
    decision = admit_batch(prepare_batch(list(docs)), AdmissionView(), context)
    return [r.message for r in decision.results if r.outcome == "rejected"]


def beta_group(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec},
    }


def test_errors_in_a_v1beta1_document_name_its_own_fields() -> None:
    assert _refusals(beta_group(workloadRef={"workloadName": "w"})) == [
        'The PodGroup "g" is invalid:\n* spec.workloadRef.templateName: Required value\n'
        '* spec.workloadRef.workloadName: Not found: "w"'
    ]


def test_a_disruption_mode_union_is_checked_as_upstream_checks_unions() -> None:
    both = _refusals(beta_group(disruptionMode={"single": {}, "all": {}}))
    neither = _refusals(beta_group(disruptionMode={}))
    assert both == [
        'The PodGroup "g" is invalid:\n* spec.disruptionMode: Invalid value: "{`single`, `all`}": exactly one of '
        "`single`, `all` is required, but multiple fields are set"
    ]
    assert neither == [
        'The PodGroup "g" is invalid:\n* spec.disruptionMode: Invalid value: "{`single`, `all`}": must specify one '
        "of: `single`, `all`"
    ]


def test_a_v1alpha2_document_keeps_its_own_field_names_in_errors() -> None:
    alpha = {**beta_group(), "apiVersion": "scheduling.k8s.io/v1alpha2"}
    alpha["spec"] = {**alpha["spec"], "podGroupTemplateRef": {"workload": {"workloadName": "w"}}}
    assert _refusals(alpha) == [
        'The PodGroup "g" is invalid:\n* spec.podGroupTemplateRef.workload.podGroupTemplateName: Required value\n'
        '* spec.podGroupTemplateRef.workload.workloadName: Not found: "w"'
    ]


@settings(max_examples=100)
@given(stored_pod_groups())
def test_a_pod_group_goes_through_every_served_version_and_comes_back_whole(stored: dict[str, Any]) -> None:
    for version in ("v1beta1", "v1alpha3", "v1alpha2"):
        resource = by_kind("PodGroup", f"scheduling.k8s.io/{version}")
        assert resource is not None
        back, _ = convert_document(as_served(resource, stored))
        assert but_scheduling(back) == but_scheduling(stored), version
    assert convert_document(as_served(by_kind("PodGroup", "scheduling.k8s.io/v1alpha2"), stored))[0] == stored


def test_a_gang_placed_once_and_waiting_again_reads_initially_scheduled_in_v1beta1_and_why_in_v1alpha2() -> (
    None
):
    first = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": ""}
    waits = {"type": "PodGroupScheduled", "status": "False", "reason": "Disrupted", "message": "placed anew"}
    stored = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "w-0", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
        "status": {
            "conditions": [
                {**first, "lastTransitionTime": "2026-12-01T10:00:00Z"},
                {**waits, "lastTransitionTime": "2026-12-01T11:00:00Z"},
            ]
        },
    }

    beta = as_served(by_kind("PodGroup", "scheduling.k8s.io/v1beta1"), stored)  # type: ignore[arg-type]
    alpha2 = as_served(by_kind("PodGroup", "scheduling.k8s.io/v1alpha2"), stored)  # type: ignore[arg-type]

    assert beta["status"]["conditions"] == [{**first, "lastTransitionTime": "2026-12-01T10:00:00Z"}]
    assert alpha2["status"] == stored["status"]


def test_a_gang_never_scheduled_reads_initially_scheduled_false_with_the_schedulers_reason() -> None:
    waits = {
        "type": "PodGroupScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/64 nodes",
    }
    stored = {"kind": "PodGroup", "spec": {}, "status": {"conditions": [waits]}}

    assert as_v1beta1(stored)["status"]["conditions"] == [{**waits, "type": "PodGroupInitiallyScheduled"}]
