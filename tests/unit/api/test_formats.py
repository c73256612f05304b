"""Name and label formats, with the API server's messages."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.api.formats import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    label_value_errors,
    path_segment_name_errors,
    regex_error,
)

LABEL = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")
FEW = settings(max_examples=40, deadline=None)


def test_regex_errors_space_examples_exactly_as_go_does():
    assert (
        regex_error("msg", "fmt", "a", "b") == "msg (e.g. 'a',  or 'b', regex used for validation is 'fmt')"
    )
    assert regex_error("msg", "fmt") == "msg (regex used for validation is 'fmt')"


def test_label_key_messages():
    assert label_key_errors("example.com/MyName") == []
    assert label_key_errors("a/b/c")[0].startswith("a valid label key must consist of")
    assert label_key_errors("/name") == ["prefix part must be non-empty"]
    assert label_key_errors("Example.com/x") == [
        "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
        "'.', and must start and end with an alphanumeric character"
    ]
    assert label_key_errors("x" * 64) == ["name part must be no more than 63 characters"]
    assert label_key_errors("example.com/")[0] == "name part must be non-empty"


def test_label_value_may_be_empty_but_not_malformed():
    assert label_value_errors("") == []
    assert label_value_errors("-x")[0].startswith("a valid label must be an empty string")


def test_dns_label_reports_length_and_dots():
    assert dns1123_label_errors("a" * 64) == ["must be no more than 63 characters"]
    assert dns1123_label_errors("a.b") == ["must not contain dots"]


def test_subdomain_reports_length():
    assert dns1123_subdomain_errors("a" * 254) == ["must be no more than 253 characters"]


def test_path_segment_names():
    assert path_segment_name_errors("..") == ["may not be '..'"]
    assert path_segment_name_errors("a%b") == ["may not contain '%'"]


@FEW
@given(st.lists(LABEL, min_size=1, max_size=4))
def test_dotted_dns_labels_are_subdomains(labels):
    name = ".".join(labels)
    assert dns1123_subdomain_errors(name) == (
        [] if len(name) <= 253 else ["must be no more than 253 characters"]
    )


@FEW
@given(LABEL)
def test_dns_labels_are_valid_label_keys_and_values(label):
    assert dns1123_label_errors(label) == []
    assert label_key_errors(label) == []
    assert label_value_errors(label) == []


@given(st.text(min_size=1, max_size=20))
def test_anything_the_label_regex_rejects_is_reported(text):
    valid = re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", text) is not None
    assert (dns1123_label_errors(text) == []) == valid
