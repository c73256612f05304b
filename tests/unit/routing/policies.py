"""Policy builders for the routing tests: the ROUTER.md example, and variants of it."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from libs.core.routing import RoutingPolicy, parse_policy

ROUTER_MD_EXAMPLE = """
providers:
  bedrock: {kind: bedrock, region: us-east-1, endpoint_url: null}       # null = real AWS; set for the emulator
  vertex:  {kind: vertex, project: acme-ai, location: us-central1, api_endpoint: null}
deployments:                      # a deployment = provider x model x capacity tier
  claude-haiku-pt:  {provider: bedrock, model: "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123def456", tier: provisioned, capacity: {tokens_per_minute: 400000, concurrency: 32}, cost: {input_per_1k: 0.0, output_per_1k: 0.0}}
  claude-haiku-od:  {provider: bedrock, model: anthropic.claude-3-haiku-20240307-v1:0, tier: on_demand, cost: {input_per_1k: 0.00025, output_per_1k: 0.00125}}
  gemini-flash-pt:  {provider: vertex, model: gemini-2.5-flash, tier: provisioned, capacity: {tokens_per_minute: 300000}}
  gemini-flash-od:  {provider: vertex, model: gemini-2.5-flash, tier: on_demand}
features:
  search-answer:
    latency: sync
    deadline_ms: 8000              # the whole request, all attempts
    first_byte_timeout_ms: 1500    # one attempt: time to first token (streaming) or to the response (not streaming)
    routes: [{weight: 90, models: [gemini-flash, claude-haiku]},   # A/B split between model chains
             {weight: 10, models: [claude-haiku, gemini-flash]}]
    budget: {tokens_per_minute: 2000000}                           # 429 to the caller beyond it
  channel-recap: {latency: async, deadline_ms: 600000, routes: [{weight: 100, models: [claude-haiku, gemini-flash]}]}
models:                           # a model name resolves to its deployments, PT first
  gemini-flash: [gemini-flash-pt, gemini-flash-od]
  claude-haiku: [claude-haiku-pt, claude-haiku-od]
breaker: {window_s: 10, min_requests: 20, error_rate: 0.5, consecutive_failures: 5, latency_p90_ms: 1000,
          open_s: 5, open_s_max: 60, ramp: [0.01, 0.05, 0.25, 1.0], ramp_step_s: 2, ramp_min_requests: 20}
api_keys: {team-search: {features: [search-answer]}}               # for the OpenAI-compatible front
"""


def example_document() -> dict[str, Any]:
    """The ROUTER.md example as a fresh, mutable document."""
    return copy.deepcopy(yaml.safe_load(ROUTER_MD_EXAMPLE))


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
