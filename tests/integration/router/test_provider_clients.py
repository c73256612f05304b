"""The provider adapters through the real SDKs: one HTTP request per call, and answers read field by field."""

from __future__ import annotations

import dataclasses

import pytest

from libs.core.routing import FailureReason, Tier
from libs.emulators import RunningEmulators
from libs.providers import Message, Provider, ProviderError, ProviderRequest, VertexProvider
from libs.providers.vertex import generate_body
from libs.router.example_policy import CLAUDE_HAIKU_OD, GEMINI_FLASH

MODELS = {"bedrock": CLAUDE_HAIKU_OD, "vertex": GEMINI_FLASH}  # on-demand model ids
SERVER_ERRORS = {"bedrock": (503, "ServiceUnavailableException"), "vertex": (503, "UNAVAILABLE")}


def call(cloud: str, tier: Tier = Tier.ON_DEMAND) -> ProviderRequest:
    return ProviderRequest(
        model=MODELS[cloud],
        tier=tier,
        messages=(Message("system", "Be brief."), Message("user", "What is a gang?")),
        max_tokens=16,
        temperature=0.2,
        labels=(("feature", "search-answer"),),
    )


@pytest.mark.parametrize("cloud", ["bedrock", "vertex"])
async def test_a_server_error_is_one_request_because_sdk_retries_are_off(
    cloud: str, providers: dict[str, Provider], emulators: RunningEmulators
) -> None:
    control = getattr(emulators, cloud)
    status, code = SERVER_ERRORS[cloud]
    control.inject_error(status, code, count=5)
    with pytest.raises(ProviderError) as caught:
        await providers[cloud].complete(call(cloud))
    assert caught.value.reason is FailureReason.UNAVAILABLE
    assert caught.value.status == status
    assert control.counters()["models"][MODELS[cloud]]["requests"] == 1


@pytest.mark.parametrize("cloud", ["bedrock", "vertex"])
async def test_a_throttle_is_one_request_because_sdk_retries_are_off(
    cloud: str, providers: dict[str, Provider], emulators: RunningEmulators
) -> None:
    control = getattr(emulators, cloud)
    control.set_capacity(MODELS[cloud], "on_demand", concurrency=0)
    with pytest.raises(ProviderError) as caught:
        await providers[cloud].complete(call(cloud))
    assert caught.value.reason is FailureReason.THROTTLED
    assert control.counters()["models"][MODELS[cloud]]["requests"] == 1


async def test_vertex_answer_carries_text_usage_stop_reason_and_the_pool_that_served(
    providers: dict[str, Provider], emulators: RunningEmulators
) -> None:
    emulators.vertex.set_output_tokens(5)
    provisioned = await providers["vertex"].complete(call("vertex", Tier.PROVISIONED))
    on_demand = await providers["vertex"].complete(call("vertex", Tier.ON_DEMAND))
    assert provisioned.text
    assert provisioned.usage.output_tokens == 5
    assert provisioned.usage.input_tokens > 0
    assert provisioned.stop_reason == "STOP"
    assert (provisioned.served_tier, on_demand.served_tier) == ("provisioned", "on_demand")


async def test_vertex_sdk_request_carries_stop_sequences_and_top_p_as_the_rest_body_does(
    providers: dict[str, Provider],
) -> None:
    """Against Vertex itself the request goes through the SDK (gRPC): it must carry what the REST body does."""
    from google.protobuf import json_format

    request = dataclasses.replace(call("vertex"), top_p=0.5, stop=("charlie", "zulu"))
    vertex = providers["vertex"]
    assert isinstance(vertex, VertexProvider)
    sdk_request = vertex.generate_request(request)
    sent = json_format.MessageToDict(type(sdk_request).pb(sdk_request))["generationConfig"]
    assert (sent["stopSequences"], sent["topP"]) == (["charlie", "zulu"], 0.5)
    assert generate_body(request)["generationConfig"] | {"temperature": 0} == sent | {"temperature": 0}
