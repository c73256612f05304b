"""The ROUTER.md example policy pointed at the emulators: for tests, benchmarks and the demo."""

from __future__ import annotations

from typing import Any

from libs.core.routing import RoutingPolicy, parse_policy

CLAUDE_HAIKU_PT_ARN = "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123def456"
CLAUDE_HAIKU_OD = "anthropic.claude-3-haiku-20240307-v1:0"
GEMINI_FLASH = "gemini-2.5-flash"


def example_policy_document(bedrock_url: str | None, vertex_url: str | None) -> dict[str, Any]:
    """The ROUTER.md example as a mutable document, with the providers' endpoints set."""
    return {
        "providers": {
            "bedrock": {"kind": "bedrock", "region": "us-east-1", "endpoint_url": bedrock_url},
            "vertex": {
                "kind": "vertex",
                "project": "acme-ai",
                "location": "us-central1",
                "api_endpoint": vertex_url,
            },
        },
        "deployments": {
            "claude-haiku-pt": {
                "provider": "bedrock",
                "model": CLAUDE_HAIKU_PT_ARN,
                "tier": "provisioned",
                "capacity": {"tokens_per_minute": 400_000, "concurrency": 32},
                "cost": {"input_per_1k": 0.0, "output_per_1k": 0.0},
            },
            "claude-haiku-od": {
                "provider": "bedrock",
                "model": CLAUDE_HAIKU_OD,
                "tier": "on_demand",
                "cost": {"input_per_1k": 0.00025, "output_per_1k": 0.00125},
            },
            "gemini-flash-pt": {
                "provider": "vertex",
                "model": GEMINI_FLASH,
                "tier": "provisioned",
                "capacity": {"tokens_per_minute": 300_000},
            },
            "gemini-flash-od": {"provider": "vertex", "model": GEMINI_FLASH, "tier": "on_demand"},
        },
        "features": {
            "search-answer": {
                "latency": "sync",
                "deadline_ms": 8000,
                "first_byte_timeout_ms": 1500,
                "routes": [
                    {"weight": 90, "models": ["gemini-flash", "claude-haiku"]},
                    {"weight": 10, "models": ["claude-haiku", "gemini-flash"]},
                ],
                "budget": {"tokens_per_minute": 2_000_000},
            },
            "channel-recap": {
                "latency": "async",
                "deadline_ms": 600_000,
                "routes": [{"weight": 100, "models": ["claude-haiku", "gemini-flash"]}],
            },
        },
        "models": {
            "gemini-flash": ["gemini-flash-pt", "gemini-flash-od"],
            "claude-haiku": ["claude-haiku-pt", "claude-haiku-od"],
        },
        "breaker": {
            "window_s": 10,
            "min_requests": 20,
            "error_rate": 0.5,
            "consecutive_failures": 5,
            "latency_p90_ms": 1000,
            "open_s": 5,
            "open_s_max": 60,
            "ramp": [0.01, 0.05, 0.25, 1.0],
            "ramp_step_s": 2,
            "ramp_min_requests": 20,
        },
        "api_keys": {"team-search": {"features": ["search-answer"]}},
    }


def example_policy(bedrock_url: str | None, vertex_url: str | None) -> RoutingPolicy:
    """The ROUTER.md example policy, validated, with the providers' endpoints set."""
    return parse_policy(example_policy_document(bedrock_url, vertex_url))
