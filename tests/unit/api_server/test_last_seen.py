"""The API server remembers the objects it last read or wrote, at most so many, and never a namespace (which
is partly derived from what it holds)."""

from __future__ import annotations

from libs.kubeapi.resources import lookup
from services.api_server.last_seen import LastSeen
from services.api_server.routes import Target

PODS = lookup("", "v1", "pods")
NAMESPACES = lookup("", "v1", "namespaces")


def pod(name: str) -> Target:
    assert PODS is not None
    return Target(PODS, "ml", name)


def test_the_least_recently_seen_go_first() -> None:
    seen = LastSeen(kept=2)
    seen.remember(pod("a"), {"metadata": {"name": "a", "resourceVersion": "1"}})
    seen.remember(pod("b"), {"metadata": {"name": "b", "resourceVersion": "2"}})
    assert seen.guess(pod("a")) is not None  # a guess does not make it recent: only a read or write does
    seen.remember(pod("c"), {"metadata": {"name": "c", "resourceVersion": "3"}})

    assert seen.guess(pod("a")) is None
    assert seen.guess(pod("b")) == {"metadata": {"name": "b", "resourceVersion": "2"}}
    assert seen.guess(pod("c")) is not None


def test_the_latest_copy_replaces_the_older_and_a_forgotten_one_is_gone() -> None:
    seen = LastSeen()
    seen.remember(pod("a"), {"metadata": {"name": "a", "resourceVersion": "1"}})
    seen.remember(pod("a"), {"metadata": {"name": "a", "resourceVersion": "5"}})
    assert seen.guess(pod("a")) == {"metadata": {"name": "a", "resourceVersion": "5"}}

    seen.forget(pod("a"))

    assert seen.guess(pod("a")) is None


def test_a_namespace_or_a_collection_is_never_remembered() -> None:
    assert NAMESPACES is not None
    seen = LastSeen()
    seen.remember(Target(NAMESPACES, None, "ml"), {"metadata": {"name": "ml", "resourceVersion": "1"}})
    assert PODS is not None
    seen.remember(Target(PODS, "ml"), {"items": []})

    assert seen.guess(Target(NAMESPACES, None, "ml")) is None
    assert seen.guess(Target(PODS, "ml")) is None
