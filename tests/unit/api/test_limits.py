"""Manifests over the documented limits are refused with a clear message, before they cost anything."""

from __future__ import annotations

import time

import pytest

from libs.api.errors import FieldPath, invalid, render_value
from libs.api.limits import MAX_DEPTH, MAX_REQUEST_BYTES, MAX_VALUES, LimitExceeded, check_document_shape
from libs.api.manifests import ManifestError, load_documents


def test_a_text_over_the_request_limit_is_refused_as_the_api_server_words_it() -> None:
    text = "kind: Pod\nmetadata: {name: p}\ndata: " + "x" * MAX_REQUEST_BYTES
    with pytest.raises(ManifestError, match=f"Request entity too large: limit is {MAX_REQUEST_BYTES}"):
        load_documents(text)


def test_a_text_at_the_limit_is_read() -> None:
    padding = "#" * (MAX_REQUEST_BYTES - 100) + "\n"
    assert load_documents(padding + "kind: Pod\n") == [{"kind": "Pod"}]


def test_nesting_deeper_than_the_limit_is_refused_and_just_inside_it_is_read() -> None:
    def nested(depth: int) -> str:
        return "a: " + "[" * (depth - 1) + "]" * (depth - 1)

    assert load_documents(nested(MAX_DEPTH))
    with pytest.raises(ManifestError, match=f"nested deeper than {MAX_DEPTH} levels"):
        load_documents(nested(MAX_DEPTH + 1))


def test_nesting_deeper_than_the_yaml_parser_recurses_is_a_manifest_error_not_a_crash() -> None:
    with pytest.raises(ManifestError, match="nested deeper"):
        load_documents("a: " + "[" * 50_000)


def test_a_yaml_alias_bomb_is_refused_without_expanding_it() -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for level in range(1, 9):  # 10**9 values once expanded
        previous = chr(ord("a") + level - 1)
        name = chr(ord("a") + level)
        lines.append(f"{name}: &{name} [{','.join(['*' + previous] * 10)}]")
    started = time.process_time()
    with pytest.raises(ManifestError, match=f"more than {MAX_VALUES} values"):
        load_documents("\n".join(lines))
    assert time.process_time() - started < 5.0  # bounded work, not a timing target: 10**9 would take hours


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ManifestError, match="nested deeper"):
        load_documents("a: &loop [*loop]")


def test_shape_check_names_the_document() -> None:
    with pytest.raises(LimitExceeded, match="document 3:"):
        check_document_shape({"a": list(range(MAX_VALUES + 1))}, 2)


def test_error_lines_escape_characters_a_terminal_would_act_on() -> None:
    path = FieldPath("metadata.labels").key("\x1b[31mred")
    assert "\x1b" not in str(path)
    assert str(path) == "metadata.labels[\\u001b[31mred]"
    shown = render_value("safe\u202eevil")
    assert "\u202e" not in shown
    assert "\\u202e" in shown
    assert "\u202e" not in str(invalid(path, "x\u202ey", "bad"))
    assert render_value("plain ünïcode") == '"plain ünïcode"'
