"""Label and field selectors parsed, checked and matched as the API server does."""

from __future__ import annotations

import pytest

from libs.kubeapi.selectors import (
    SelectorError,
    check_fields,
    parse_field_selector,
    parse_label_selector,
    select,
    selectable_fields,
)


def pod(name: str, labels: dict | None = None, **extra) -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ml", "labels": labels or {}}, **extra}


ITEMS = [
    pod(
        "a",
        {"app": "train", "tier": "gpu", "rank": "3"},
        spec={"nodeName": "n1"},
        status={"phase": "Running"},
    ),
    pod("b", {"app": "serve"}, spec={"nodeName": "n2"}, status={"phase": "Pending"}),
    pod("c"),
]


def names(items) -> list[str]:
    return [item["metadata"]["name"] for item in items]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", ["a", "b", "c"]),
        ("app=train", ["a"]),
        ("app==serve", ["b"]),
        ("app!=train", ["b", "c"]),
        ("app in (train, serve)", ["a", "b"]),
        ("app notin (train)", ["b", "c"]),
        ("tier", ["a"]),
        ("!tier", ["b", "c"]),
        ("app in (train,serve),!tier", ["b"]),
        ("rank>2", ["a"]),
        ("rank<3", []),
        ("app=", []),
        ("x in (foo,,baz)", []),
    ],
)
def test_label_selectors_match_as_upstream(selector, expected):
    assert names(select(ITEMS, labels=parse_label_selector(selector))) == expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("a=b=c", "found '=', expected: ',' or 'end of string'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("a,", "found '', expected: identifier after ','"),
        ("=a", "found '=', expected: !, identifier, or 'end of string'"),
        (
            "a>x",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "foo_=x",
            'unable to parse requirement: <nil>: Invalid value: "foo_": name part must consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
            "or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "k=" + "v" * 64,
            'unable to parse requirement: values[0][k]: Invalid value: "'
            + "v" * 64
            + '": must be no more than 63 characters',
        ),
    ],
)
def test_malformed_label_selectors_are_refused_in_labels_parse_words(selector, message):
    with pytest.raises(SelectorError) as refused:
        parse_label_selector(selector)
    assert str(refused.value) == message


def test_requirements_are_sorted_by_key():
    assert [r.key for r in parse_label_selector("z,a=1,m in (x)").requirements] == ["a", "m", "z"]


def test_field_selectors_match_pods():
    selector = check_fields(parse_field_selector("spec.nodeName=n1,status.phase==Running"), "", "v1", "Pod")
    assert names(select(ITEMS, fields=selector)) == ["a"]
    selector = check_fields(parse_field_selector("metadata.name!=a,metadata.namespace=ml"), "", "v1", "Pod")
    assert names(select(ITEMS, fields=selector)) == ["b", "c"]
    legacy = check_fields(parse_field_selector("spec.host=n2"), "", "v1", "Pod")
    assert names(select(ITEMS, fields=legacy)) == ["b"]


def test_field_values_are_unescaped():
    assert parse_field_selector(r"metadata.name=a\,b\=c\\d").terms[0].value == "a,b=c\\d"


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
        (r"metadata.name=a\q", r"invalid field selector: invalid escape sequence: \q"),
    ],
)
def test_malformed_field_selectors(selector, message):
    with pytest.raises(SelectorError) as refused:
        parse_field_selector(selector)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("group", "version", "kind", "field", "message"),
    [
        ("", "v1", "Pod", "spec.foo", "field label not supported: spec.foo"),
        ("", "v1", "Node", "metadata.namespace", "field label not supported: metadata.namespace"),
        ("", "v1", "Event", "message", "field label not supported: message"),
        ("batch", "v1", "Job", "spec.foo", 'field label "spec.foo" not supported for Job'),
        (
            "resource.k8s.io",
            "v1",
            "ResourceSlice",
            "spec.pool",
            "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool",
        ),
        (
            "scheduling.k8s.io",
            "v1alpha2",
            "PodGroup",
            "spec.foo",
            '"spec.foo" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
    ],
)
def test_unsupported_fields_are_refused_per_kind(group, version, kind, field, message):
    with pytest.raises(SelectorError) as refused:
        check_fields(parse_field_selector(f"{field}=x"), group, version, kind)
    assert str(refused.value) == message


def test_selectable_fields_per_kind():
    assert (
        selectable_fields({"kind": "Node", "metadata": {"name": "n"}, "spec": {"unschedulable": True}})[
            "spec.unschedulable"
        ]
        == "true"
    )
    assert (
        selectable_fields({"kind": "Job", "metadata": {"name": "j"}, "status": {"succeeded": 2}})[
            "status.successful"
        ]
        == "2"
    )
    event = {
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "name": "a", "uid": "u1"},
        "reason": "Scheduled",
        "source": {"component": "default-scheduler"},
        "type": "Normal",
    }
    fields = selectable_fields(event)
    assert fields["involvedObject.kind"] == "Pod"
    assert fields["involvedObject.uid"] == "u1"
    assert fields["source"] == "default-scheduler"
    assert fields["reason"] == "Scheduled"
    assert fields["type"] == "Normal"
