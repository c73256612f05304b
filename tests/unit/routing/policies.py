"""Policy builders for the routing tests: the example policy (deploy/router/policy.yaml), and
variants of it."""

from __future__ import annotations

from typing import Any

from libs.core.routing import RoutingPolicy, parse_policy
from libs.router.example_policy import EXAMPLE_POLICY_PATH, example_policy_document

EXAMPLE_POLICY_TEXT = EXAMPLE_POLICY_PATH.read_text()


def example_document() -> dict[str, Any]:
    """The example policy as a fresh, mutable document, on the real clouds' endpoints."""
    return example_policy_document(None, None)


def make_policy(**sections: Any) -> RoutingPolicy:
    """The example policy with whole top-level sections replaced."""
    document = example_document()
    document.update(sections)
    return parse_policy(document)


def single_route_policy(
    *models: str, latency: str = "sync", breaker: dict[str, Any] | None = None
) -> RoutingPolicy:
    """The example policy whose `search-answer` feature has one route over `models`."""
    document = example_document()
    document["features"]["search-answer"]["routes"] = [{"weight": 1, "models": list(models)}]
    document["features"]["search-answer"]["latency"] = latency
    if breaker is not None:
        document["breaker"] = breaker
    return parse_policy(document)
