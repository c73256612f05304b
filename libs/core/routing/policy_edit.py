"""What a policy edit changes that its author may not have meant. A file cut short (an editor's half-written save,
a copy that lost its tail) is often still a valid policy, only a different one: the reload goes ahead, and these
warnings are logged and audited with it."""

from __future__ import annotations

from libs.api.router_policy.policy import RoutingPolicy


def edit_warnings(previous: RoutingPolicy, policy: RoutingPolicy) -> list[str]:
    """Warnings about replacing `previous` by `policy`, each naming the section it is about: every API key gone
    (each caller of the OpenAI front gets 401), or the `breaker` section gone (its defaults apply)."""
    warnings = []
    if previous.api_keys and not policy.api_keys:
        warnings.append(
            f"api_keys: none left (the policy in force had {len(previous.api_keys)}): every caller of the "
            "OpenAI front now gets 401"
        )
    if "breaker" in previous.model_fields_set and "breaker" not in policy.model_fields_set:
        warnings.append("breaker: the section is gone: the default breaker settings apply")
    return warnings


def changed_providers(previous: RoutingPolicy, policy: RoutingPolicy) -> list[str]:
    """Providers of both policies whose definition changed (kind, region, project, location, endpoint)."""
    return sorted(
        name
        for name, spec in policy.providers.items()
        if name in previous.providers and previous.providers[name] != spec
    )
