"""Reading the policy file, with provider endpoints taken from the environment.

Templating rule: in the `providers` section, a string field written `${NAME}` or `${NAME:-default}` takes the
value of environment variable NAME (or the default); an empty value means null, i.e. the real cloud. So
`deploy/router/policy.yaml` says `endpoint_url: ${PODWAY_BEDROCK_ENDPOINT}` and the same file serves the local
emulators and, with the variables set empty, AWS and GCP. The rule applies when the router opens its provider
clients, at start: a hot reload changes routes, deployments and breakers, not the clients.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from libs.core.routing import PolicyError, PolicyIssue, RoutingPolicy

PLACEHOLDER = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}$")
_ENDPOINT_FIELDS = ("region", "endpoint_url", "project", "location", "api_endpoint")


def resolve_provider_placeholders(
    policy: RoutingPolicy, env: Mapping[str, str] | None = None
) -> RoutingPolicy:
    """The policy with `${NAME}` / `${NAME:-default}` provider fields replaced from `env` (os.environ)."""
    env = os.environ if env is None else env
    issues: list[PolicyIssue] = []
    providers = {}
    for name, spec in policy.providers.items():
        updates: dict[str, str | None] = {}
        for field in _ENDPOINT_FIELDS:
            value = getattr(spec, field)
            match = PLACEHOLDER.match(value) if isinstance(value, str) else None
            if match is None:
                continue
            variable, default = match.group(1), match.group(2)
            resolved = env.get(variable, default)
            if resolved is None:
                issues.append(
                    PolicyIssue(f"providers.{name}.{field}", f"environment variable {variable} is not set")
                )
                continue
            updates[field] = resolved or None
        providers[name] = spec.model_copy(update=updates) if updates else spec
    if issues:
        raise PolicyError(issues)
    return policy.model_copy(update={"providers": providers})
