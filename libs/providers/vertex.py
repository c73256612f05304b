"""GCP Vertex AI through google-cloud-aiplatform's async REST transport: generateContent and
streamGenerateContent, imported lazily (the package is large and slow to import).

Retries are off here too, which takes one step: the `rest_asyncio` transport sends through google-auth's
`AsyncAuthorizedSession`, which by itself retries 429/5xx three times with exponential backoff (~3 s for one
throttle). The session is patched to make a single attempt.

The client's proto-plus wrappers copy on construction and convert on every field access, so requests are built
as raw protobuf messages and handed over with `wrap` (no copy), and responses are read through their raw
protobuf (`pb`), both public proto-plus API. The session's per-call `max_allowed_time` is off too: google-auth
enforces it by running each step in its own task (`asyncio.wait_for`), and the router already bounds every
attempt by its first-byte timeout and the request's deadline. Together these save ~0.1 ms of CPU per call
(~15% of the call).

The tier travels in the `X-Vertex-AI-LLM-Request-Type` header: `dedicated` for PT (a 429 then means PT is
exhausted, and the router re-issues on its OD deployment with `shared`), `shared` for on-demand.
`usageMetadata.trafficType` records which capacity actually served.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from libs.core.routing import FailureReason, ProviderSpec, Tier, classify_vertex
from libs.providers.base import Chunk, Completion, ProviderError, ProviderRequest, Usage, split_system

REQUEST_TYPE_HEADER = "x-vertex-ai-llm-request-type"
_REQUEST_TYPE = {Tier.PROVISIONED: "dedicated", Tier.ON_DEMAND: "shared"}
_SERVED_TIER = {"PROVISIONED_THROUGHPUT": "provisioned", "ON_DEMAND": "on_demand"}


class VertexProvider:
    """Provider for one Vertex project/location (or its emulator)."""

    def __init__(self, name: str, spec: ProviderSpec, client: Any, types: Any) -> None:
        self.name = name
        self._client = client
        self._types = types
        self._request_pb = types.GenerateContentRequest.pb()
        self._content_pb = types.Content.pb()
        self._part_pb = types.Part.pb()
        self._config_pb = types.GenerationConfig.pb()
        self._model_prefix = f"projects/{spec.project}/locations/{spec.location}/publishers/google/models/"

    @classmethod
    async def open(cls, name: str, spec: ProviderSpec) -> VertexProvider:
        """Against an `api_endpoint` (the emulator): the async REST transport, anonymous. Against Vertex itself:
        the default gRPC transport with application default credentials at the regional endpoint."""
        from google.api_core.client_options import ClientOptions
        from google.cloud import aiplatform_v1

        if spec.api_endpoint:
            from google.auth.aio.credentials import AnonymousCredentials

            client = aiplatform_v1.PredictionServiceAsyncClient(
                transport="rest_asyncio",
                client_options=ClientOptions(api_endpoint=spec.api_endpoint),
                # The REST transport takes google.auth.aio credentials, whatever its annotation says.
                credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call, arg-type]
            )
            _disable_retries(client.transport._session)  # type: ignore[attr-defined]
        else:
            endpoint = f"{spec.location}-aiplatform.googleapis.com"
            client = aiplatform_v1.PredictionServiceAsyncClient(
                client_options=ClientOptions(api_endpoint=endpoint)
            )
        return cls(name, spec, client, aiplatform_v1)

    async def aclose(self) -> None:
        """Close the client's HTTP session."""
        await self._client.transport.close()

    async def complete(self, request: ProviderRequest) -> Completion:
        """generateContent: one whole answer."""
        started = time.perf_counter()
        try:
            response = await self._client.generate_content(
                request=self.generate_request(request), metadata=_metadata(request.tier), retry=None
            )
        except Exception as exc:
            raise vertex_error(exc, request.tier) from None
        first_byte_s = time.perf_counter() - started
        reply = self._types.GenerateContentResponse.pb(response)
        usage, served = _usage(reply, request.tier)
        candidate = reply.candidates[0] if reply.candidates else None
        return Completion(
            text=_text(reply),
            usage=usage or Usage(0, 0),
            served_tier=served,
            stop_reason=_enum_name(candidate, "finish_reason") if candidate is not None else None,
            first_byte_s=first_byte_s,
        )

    async def stream(self, request: ProviderRequest) -> AsyncIterator[Chunk]:
        """streamGenerateContent: text deltas, then a final chunk with usage and the served tier. A stream cut
        short (the array never closes) raises ProviderError, never a clean end."""
        try:
            responses = await self._client.stream_generate_content(
                request=self.generate_request(request), metadata=_metadata(request.tier), retry=None
            )
        except Exception as exc:
            raise vertex_error(exc, request.tier) from None
        usage: Usage | None = None
        served = request.tier.value
        try:
            async for response in responses:
                reply = self._types.GenerateContentResponse.pb(response)
                text = _text(reply)
                if text:
                    yield Chunk(text)
                reported, served = _usage(reply, request.tier)
                usage = reported or usage
        except Exception as exc:
            raise vertex_error(exc, request.tier) from None
        finally:
            await responses.cancel()
        if usage is None:
            raise ProviderError(FailureReason.UNAVAILABLE, "stream ended without usage metadata")
        yield Chunk("", usage=usage, served_tier=served)

    def generate_request(self, request: ProviderRequest) -> Any:
        """The GenerateContentRequest for a ProviderRequest (a proto-plus wrapper around the raw message)."""
        content, part = self._content_pb, self._part_pb
        system, conversation = split_system(request.messages)
        config = self._config_pb(max_output_tokens=request.max_tokens)
        if request.temperature is not None:
            config.temperature = request.temperature
        message = self._request_pb(
            model=self._model_prefix + request.model,
            contents=[
                content(role="model" if m.role == "assistant" else "user", parts=[part(text=m.content)])
                for m in conversation
            ],
            generation_config=config,
            labels=dict(request.labels),
        )
        if system:
            message.system_instruction.CopyFrom(content(parts=[part(text=text) for text in system]))
        return self._types.GenerateContentRequest.wrap(message)


def _disable_retries(session: Any) -> None:
    """Make an AsyncAuthorizedSession send each request once (the router is the only retry loop) without a
    `max_allowed_time` of its own (the router bounds each attempt)."""
    request = session.request

    async def single_attempt(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        # The verb helpers (post, get) pass (data, headers, max_allowed_time, timeout, total_attempts)
        # positionally after the url.
        if len(args) >= 5:
            args = (*args[:2], None, args[3], 1, *args[5:])
        else:
            kwargs["max_allowed_time"] = None
            kwargs["total_attempts"] = 1
        return await request(method, url, *args, **kwargs)

    session.request = single_attempt


def vertex_error(exc: Exception, tier: Tier) -> ProviderError:
    """Normalise any exception the Vertex client raises."""
    from google.api_core import exceptions as api_exceptions
    from google.auth import exceptions as auth_exceptions

    if isinstance(exc, api_exceptions.GoogleAPICallError):
        status = int(exc.code) if exc.code is not None else None
        return ProviderError(
            classify_vertex(status, tier), exc.message or str(exc), status=status, code=type(exc).__name__
        )
    if isinstance(
        exc, (auth_exceptions.TransportError, aiohttp.ClientConnectionError, OSError, TimeoutError)
    ):
        return ProviderError(FailureReason.TIMEOUT, f"{type(exc).__name__}: {exc}", code=type(exc).__name__)
    return ProviderError(FailureReason.UNAVAILABLE, f"{type(exc).__name__}: {exc}", code=type(exc).__name__)


def _metadata(tier: Tier) -> tuple[tuple[str, str], ...]:
    return ((REQUEST_TYPE_HEADER, _REQUEST_TYPE[tier]),)


def _text(response: Any) -> str:
    """The answer's text, from a raw GenerateContentResponse."""
    if not response.candidates:
        return ""
    return "".join(part.text for part in response.candidates[0].content.parts)


def _usage(response: Any, tier: Tier) -> tuple[Usage | None, str]:
    """Usage and the capacity that served, from a raw GenerateContentResponse."""
    if not response.HasField("usage_metadata"):
        return None, tier.value
    metadata = response.usage_metadata
    usage = Usage(input_tokens=metadata.prompt_token_count, output_tokens=metadata.candidates_token_count)
    traffic = _enum_name(metadata, "traffic_type")
    return usage, _SERVED_TIER.get(
        traffic, tier.value if traffic == "TRAFFIC_TYPE_UNSPECIFIED" else traffic.lower()
    )


def _enum_name(message: Any, field: str) -> str:
    """The name of an enum field of a raw message (its number if this client does not know it)."""
    value = getattr(message, field)
    described = message.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number.get(value)
    return described.name if described is not None else str(value)
