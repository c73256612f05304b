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

Against an `api_endpoint` (the REST transport), generateContent (the hot path) and streamGenerateContent are
sent by `GenerateCall`: the JSON body the REST transport would send, with the transport's own credentials and
host, on a pooled keep-alive connection (libs.providers.http_pool), the JSON answer (or each SSE line) read
directly. Through the client the same call cost ~1 ms of CPU (proto-plus, path transcoding, protobuf's JSON
mapping both ways, google-auth's session); this way a fraction of that. The gRPC transport against Vertex
itself stays on the client.

The tier travels in the `X-Vertex-AI-LLM-Request-Type` header: `dedicated` for PT (a 429 then means PT is
exhausted, and the router re-issues on its OD deployment with `shared`), `shared` for on-demand.
`usageMetadata.trafficType` records which capacity actually served.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiohttp
import orjson

from libs.core.routing import FailureReason, ProviderSpec, Tier, classify_vertex
from libs.providers.base import Chunk, Completion, ProviderError, ProviderRequest, Usage, split_system
from libs.providers.http_pool import HttpPool

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
        transport = client.transport
        self._generate = (
            GenerateCall(transport._host, self._model_prefix, transport._credentials)
            if spec.api_endpoint
            else None
        )

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
        if self._generate is not None:
            await self._generate.aclose()
        await self._client.transport.close()

    async def complete(self, request: ProviderRequest) -> Completion:
        """generateContent: one whole answer."""
        if self._generate is not None:
            return await self._generate.send(request)
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
        if self._generate is not None:
            async with contextlib.aclosing(self._generate.stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
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
        if request.top_p is not None:
            config.top_p = request.top_p
        config.stop_sequences.extend(request.stop)
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


class GenerateCall:
    """generateContent and its stream on a pooled keep-alive client (libs.providers.http_pool) with the REST
    transport's host and credentials."""

    def __init__(self, host: str, model_prefix: str, credentials: Any) -> None:
        origin = host if "://" in host else f"https://{host}"
        self._origin = origin.rstrip("/")
        self._url_prefix = f"{self._origin}/v1/{model_prefix}"
        self._credentials = credentials
        self._pool: HttpPool | None = None

    async def send(self, request: ProviderRequest) -> Completion:
        """One whole answer; raises ProviderError."""
        started = time.perf_counter()
        url = f"{self._url_prefix}{request.model}:generateContent"
        headers = {"content-type": "application/json", REQUEST_TYPE_HEADER: _REQUEST_TYPE[request.tier]}
        try:
            await self._credentials.before_request(None, "POST", url, headers)
            answer = await self._http().post(
                url[len(self._origin) :], orjson.dumps(generate_body(request)), headers
            )
        except Exception as exc:
            raise vertex_error(exc, request.tier) from None
        first_byte_s = time.perf_counter() - started
        if answer.status != 200:
            raise response_error(answer.status, answer.body, request.tier)
        return completion_of(orjson.loads(answer.body), request.tier, first_byte_s)

    async def stream(self, request: ProviderRequest) -> AsyncGenerator[Chunk, None]:
        """streamGenerateContent as server-sent events (`alt=sse`), each `data:` line handed on as it arrives;
        an error object, or a stream that ends without usage, raises ProviderError."""
        url = f"{self._url_prefix}{request.model}:streamGenerateContent?alt=sse"
        headers = {"content-type": "application/json", REQUEST_TYPE_HEADER: _REQUEST_TYPE[request.tier]}
        usage: Usage | None = None
        served = request.tier.value
        try:
            await self._credentials.before_request(None, "POST", url, headers)
            body = orjson.dumps(generate_body(request))
            async with self._http().stream(url[len(self._origin) :], body, headers) as answer:
                if answer.status != 200:
                    raise response_error(answer.status, await answer.read(), request.tier)
                async for line in _lines(answer.chunks()):
                    if not line.startswith(b"data:"):
                        continue
                    event = orjson.loads(line[5:])
                    error = event.get("error")
                    if error is not None:
                        raise response_error(int(error.get("code") or 503), line[5:], request.tier)
                    completion = completion_of(event, request.tier, 0.0)
                    if completion.text:
                        yield Chunk(completion.text)
                    if "usageMetadata" in event:
                        usage, served = completion.usage, completion.served_tier
        except ProviderError:
            raise
        except Exception as exc:
            raise vertex_error(exc, request.tier) from None
        if usage is None:
            raise ProviderError(FailureReason.UNAVAILABLE, "stream ended without usage metadata")
        yield Chunk("", usage=usage, served_tier=served)

    def _http(self) -> HttpPool:
        if self._pool is None:  # created in the running loop, on first use
            self._pool = HttpPool(self._origin)
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of a body arriving in pieces, each as soon as its end has arrived."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line
    if pending:
        yield pending


def generate_body(request: ProviderRequest) -> dict[str, Any]:
    """The JSON generateContent request (the REST form of the GenerateContentRequest)."""
    system, conversation = split_system(request.messages)
    config: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["topP"] = request.top_p
    if request.stop:
        config["stopSequences"] = list(request.stop)
    body: dict[str, Any] = {
        "contents": [
            {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
            for m in conversation
        ],
        "generationConfig": config,
    }
    if request.labels:
        body["labels"] = dict(request.labels)
    if system:
        body["systemInstruction"] = {"parts": [{"text": text} for text in system]}
    return body


def completion_of(answer: dict[str, Any], tier: Tier, first_byte_s: float) -> Completion:
    """A Completion from a JSON GenerateContentResponse."""
    candidates = answer.get("candidates") or []
    candidate = candidates[0] if candidates else {}
    parts = (candidate.get("content") or {}).get("parts") or []
    metadata = answer.get("usageMetadata")
    usage, served = Usage(0, 0), tier.value
    if metadata is not None:
        usage = Usage(int(metadata.get("promptTokenCount", 0)), int(metadata.get("candidatesTokenCount", 0)))
        traffic = metadata.get("trafficType") or "TRAFFIC_TYPE_UNSPECIFIED"
        served = _SERVED_TIER.get(
            traffic, tier.value if traffic == "TRAFFIC_TYPE_UNSPECIFIED" else traffic.lower()
        )
    return Completion(
        text="".join(part.get("text", "") for part in parts),
        usage=usage,
        served_tier=served,
        stop_reason=candidate.get("finishReason") if candidate else None,
        first_byte_s=first_byte_s,
    )


def response_error(status: int, raw: bytes, tier: Tier) -> ProviderError:
    """Normalise an error answer, named as google-api-core names its exception for the status."""
    from google.api_core import exceptions as api_exceptions

    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    code = api_exceptions.exception_class_for_http_status(status).__name__  # type: ignore[no-untyped-call]
    return ProviderError(classify_vertex(status, tier), message or f"HTTP {status}", status=status, code=code)


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
