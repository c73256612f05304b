"""Opening one Provider per entry of a policy's `providers` section."""

from __future__ import annotations

from collections.abc import Mapping

from libs.core.routing import ProviderKind, ProviderSpec
from libs.providers.base import Provider
from libs.providers.bedrock import BedrockProvider
from libs.providers.vertex import VertexProvider


async def open_provider(name: str, spec: ProviderSpec) -> Provider:
    """The adapter for one provider entry, with its pooled client open."""
    if spec.kind is ProviderKind.BEDROCK:
        return await BedrockProvider.open(name, spec)
    return await VertexProvider.open(name, spec)


async def open_providers(specs: Mapping[str, ProviderSpec]) -> dict[str, Provider]:
    """Adapters for every provider of a policy; closes those already open if one fails."""
    opened: dict[str, Provider] = {}
    try:
        for name, spec in specs.items():
            opened[name] = await open_provider(name, spec)
    except BaseException:
        await close_providers(opened)
        raise
    return opened


async def reopen_changed(
    providers: Mapping[str, Provider], previous: Mapping[str, ProviderSpec], specs: Mapping[str, ProviderSpec]
) -> dict[str, Provider]:
    """Adapters for `specs`: those of `providers` whose spec is the same in `previous` are kept, the others (a
    changed endpoint, region or project; a new provider) are opened. Closing what is left out is the caller's."""
    kept = {
        name: providers[name]
        for name, spec in specs.items()
        if name in providers and previous.get(name) == spec
    }
    return kept | await open_providers({name: spec for name, spec in specs.items() if name not in kept})


async def close_providers(providers: Mapping[str, Provider]) -> None:
    """Close every adapter."""
    for provider in providers.values():
        await provider.aclose()
