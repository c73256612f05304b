"""The example policy, `deploy/router/policy.yaml` (docs/router.md), pointed at given endpoints: for tests,
benchmarks and the demo. That file is its only copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from libs.core.routing import RoutingPolicy, parse_policy

EXAMPLE_POLICY_PATH = Path(__file__).resolve().parents[2] / "deploy" / "router" / "policy.yaml"


def example_policy_document(bedrock_url: str | None, vertex_url: str | None) -> dict[str, Any]:
    """The example policy as a fresh, mutable document, with the providers' endpoints set (None: the real
    clouds)."""
    document: dict[str, Any] = yaml.safe_load(EXAMPLE_POLICY_PATH.read_text())
    document["providers"]["bedrock"]["endpoint_url"] = bedrock_url
    document["providers"]["vertex"]["api_endpoint"] = vertex_url
    return document


def example_policy(bedrock_url: str | None, vertex_url: str | None) -> RoutingPolicy:
    """The example policy, validated, with the providers' endpoints set."""
    return parse_policy(example_policy_document(bedrock_url, vertex_url))


# The provider model ids of the example's deployments, as the emulators see them.
_DEPLOYMENTS: dict[str, dict[str, Any]] = example_policy_document(None, None)["deployments"]
CLAUDE_HAIKU_PT_ARN: str = _DEPLOYMENTS["claude-haiku-pt"]["model"]
CLAUDE_HAIKU_OD: str = _DEPLOYMENTS["claude-haiku-od"]["model"]
GEMINI_FLASH: str = _DEPLOYMENTS["gemini-flash-pt"]["model"]
