from __future__ import annotations

import pytest

from libs.client.selectors import parse_selector, select


def obj(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}}


ITEMS = [obj("a", app="train", tier="gpu"), obj("b", app="serve"), obj("c")]


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("app=train", ["a"]),
        ("app==serve", ["b"]),
        ("app!=train", ["b", "c"]),
        ("app in (train, serve)", ["a", "b"]),
        ("app notin (train)", ["b", "c"]),
        ("tier", ["a"]),
        ("!tier", ["b", "c"]),
        ("app in (train,serve),!tier", ["b"]),
        ("app=train,tier=cpu", []),
    ],
)
def test_selectors_as_kubectl_reads_them(selector, names):
    assert [o["metadata"]["name"] for o in select(ITEMS, parse_selector(selector))] == names


def test_a_malformed_selector_is_refused_in_the_api_servers_words():
    with pytest.raises(ValueError, match="found '=', expected: ',' or 'end of string'"):
        parse_selector("a=b=c")
