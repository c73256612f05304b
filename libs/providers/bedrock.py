"""AWS Bedrock Runtime: Converse and ConverseStream with an aiobotocore client's credentials, region, signing
name and endpoint.

The calls themselves do not go through botocore's request pipeline: the body is the one the SDK would
serialise, signed with the same SigV4 (tests check the signatures equal), sent on a pooled keep-alive connection,
and the answer read directly (JSON for Converse; ConverseStream's binary event stream decoded by botocore's own
event-stream parser as the bytes arrive). Through botocore the same Converse call cost ~1.2 ms of CPU (its
generic serialiser, endpoint ruleset, event hooks, SigV4 over a generic request, and parser); this way a
fraction of that, and a stream's first event reaches the router as soon as its bytes do. There are no
retries: the router is the only retry loop. PT deployments pass their provisioned-model ARN as modelId.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any
from urllib.parse import quote, urlsplit

import orjson
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer, ParserError

from libs.core.routing import FailureReason, ProviderSpec, Tier, classify_bedrock
from libs.providers.base import (
    Chunk,
    Completion,
    Message,
    ProviderError,
    ProviderRequest,
    Usage,
    split_system,
)
from libs.providers.http_pool import HttpPool
from libs.providers.sigv4 import AwsCredentials, SigV4Signer

_session: Any = None


def _shared_session() -> Any:
    """One botocore session per process: its loader caches the parsed service model (~1 s per client otherwise)."""
    global _session
    if _session is None:
        _session = get_session()
    return _session


class BedrockProvider:
    """Provider for one Bedrock region (or its emulator)."""

    def __init__(
        self, name: str, client: Any, exit_stack: contextlib.AsyncExitStack, *, max_connections: int = 256
    ) -> None:
        self.name = name
        self._client = client
        self._exit_stack = exit_stack
        self._converse = ConverseCall(client, max_connections=max_connections)

    @classmethod
    async def open(cls, name: str, spec: ProviderSpec, *, max_connections: int = 256) -> BedrockProvider:
        """Create the pooled client; an `endpoint_url` (the emulator) gets dummy credentials."""
        config = AioConfig(
            retries={"total_max_attempts": 1, "mode": "standard"},
            # The router builds every request itself; botocore's validation costs ~0.4 ms of CPU per call.
            parameter_validation=False,
            max_pool_connections=max_connections,
            connect_timeout=5,
            read_timeout=600,
            tcp_keepalive=True,
        )
        credentials: dict[str, str] = {}
        if spec.endpoint_url:
            credentials = {"aws_access_key_id": "emulator", "aws_secret_access_key": "emulator"}
        stack = contextlib.AsyncExitStack()
        client = await stack.enter_async_context(
            _shared_session().create_client(
                "bedrock-runtime",
                region_name=spec.region,
                endpoint_url=spec.endpoint_url,
                config=config,
                **credentials,
            )
        )
        return cls(name, client, stack, max_connections=max_connections)

    async def aclose(self) -> None:
        """Close the client and its connection pool."""
        await self._converse.aclose()
        await self._exit_stack.aclose()

    async def complete(self, request: ProviderRequest) -> Completion:
        """Converse: one whole answer."""
        started = time.perf_counter()
        response = await self._converse.send(request)
        first_byte_s = time.perf_counter() - started
        content = response["output"]["message"]["content"]
        return Completion(
            text="".join(block.get("text", "") for block in content),
            usage=_usage(response["usage"]),
            served_tier=_served_tier(response, request.tier),
            stop_reason=response.get("stopReason"),
            first_byte_s=first_byte_s,
        )

    async def stream(self, request: ProviderRequest) -> AsyncIterator[Chunk]:
        """ConverseStream: text deltas, then a final chunk with usage. In-stream exceptions are raised as
        ProviderError; a stream that ends without its metadata event is an error too, never a clean end."""
        usage: Usage | None = None
        stop_reason = served = None
        # Closed with this generator: a caller leaving early releases the connection at once.
        async with contextlib.aclosing(self._converse.stream(request)) as events:
            async for kind, event in events:
                if kind == "contentBlockDelta":
                    text = event["delta"].get("text")
                    if text:
                        yield Chunk(text)
                elif kind == "messageStop":
                    stop_reason = event.get("stopReason")
                elif kind == "metadata":
                    usage = _usage(event["usage"])
                    served = _served_tier(event, request.tier)
        if usage is None:
            raise ProviderError(FailureReason.UNAVAILABLE, "stream ended without its metadata event")
        yield Chunk("", usage=usage, served_tier=served, stop_reason=stop_reason)


class ConverseCall:
    """Converse and ConverseStream on a pooled keep-alive client (libs.providers.http_pool), signed with the
    client's credentials (see the module)."""

    def __init__(self, client: Any, *, max_connections: int) -> None:
        self._client = client
        endpoint = urlsplit(client.meta.endpoint_url)
        self._origin = f"{endpoint.scheme}://{endpoint.netloc}"
        self._host = endpoint.netloc
        self._path_prefix = f"{endpoint.path.rstrip('/')}/model/"
        self._signer = SigV4Signer(client.meta.region_name, client.meta.service_model.signing_name)
        self._max_connections = max_connections
        self._pool: HttpPool | None = None
        self._targets: dict[tuple[str, str], str] = {}

    def _http(self) -> HttpPool:
        if self._pool is None:  # created in the running loop, on first use
            self._pool = HttpPool(self._origin, max_connections=self._max_connections)
        return self._pool

    async def send(self, request: ProviderRequest) -> dict[str, Any]:
        """The parsed Converse answer; raises ProviderError."""
        path, body, headers = await self._signed(request, "converse")
        try:
            answer = await self._http().post(path, body, headers)
        except OSError as exc:
            raise transport_error(exc) from None
        if answer.status != 200:
            raise response_error(
                answer.status, answer.headers.get("x-amzn-errortype"), answer.body, request.tier
            )
        converse: dict[str, Any] = orjson.loads(answer.body)
        return converse

    async def stream(self, request: ProviderRequest) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """ConverseStream's events as (event type, payload), decoded with botocore's event-stream parser as
        the bytes arrive; an in-stream exception raises ProviderError."""
        path, body, headers = await self._signed(request, "converse-stream")
        try:
            async with self._http().stream(path, body, headers) as answer:
                if answer.status != 200:
                    raw = await answer.read()
                    raise response_error(
                        answer.status, answer.headers.get("x-amzn-errortype"), raw, request.tier
                    )
                frames = EventStreamBuffer()
                async for data in answer.chunks():
                    frames.add_data(data)
                    for message in frames:
                        event_headers = message.headers
                        if event_headers.get(":message-type") == "event":
                            yield event_headers[":event-type"], orjson.loads(message.payload)
                        else:
                            raise stream_error(event_headers, message.payload, request.tier)
        except (OSError, ChecksumMismatch, ParserError) as exc:
            raise transport_error(exc) from None

    async def _signed(self, request: ProviderRequest, operation: str) -> tuple[str, bytes, dict[str, str]]:
        """The path, body and signed headers of one call."""
        params = converse_params(request)
        model = params.pop("modelId")
        body = orjson.dumps(params)
        path = self._targets.get((model, operation))
        if path is None:
            path = self._targets[model, operation] = f"{self._path_prefix}{quote(model, safe='')}/{operation}"
        return path, body, self._signer.headers(self._host, path, body, await self._credentials())

    async def _credentials(self) -> AwsCredentials:
        credentials = self._client._request_signer._credentials
        if credentials is None:
            raise ProviderError(FailureReason.CLIENT_ERROR, "no AWS credentials", code="NoCredentials")
        frozen = await credentials.get_frozen_credentials()
        return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()


def response_error(status: int, error_type: str | None, raw: bytes, tier: Tier) -> ProviderError:
    """Normalise an error answer: the code (header `x-amzn-ErrorType`, else the body's `__type`) decides
    before the status, as for the SDK's ClientError."""
    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    code = (error_type or str(body.get("__type") or "")).split(":")[0].rpartition("#")[2] or None
    message = body.get("message") or body.get("Message") or f"HTTP {status}"
    return ProviderError(classify_bedrock(status, code, tier), str(message), status=status, code=code)


def stream_error(headers: dict[str, Any], payload: bytes, tier: Tier) -> ProviderError:
    """An in-stream exception (`:message-type: exception`, e.g. `throttlingException`)."""
    code = str(headers.get(":exception-type") or headers.get(":error-code") or "")
    try:
        message = orjson.loads(payload).get("message") if payload else None
    except (orjson.JSONDecodeError, AttributeError):
        message = None
    return ProviderError(
        classify_bedrock(None, code, tier), message or code or "stream error", code=code or None
    )


def converse_params(request: ProviderRequest) -> dict[str, Any]:
    """The Converse request for a ProviderRequest."""
    system, conversation = split_system(request.messages)
    inference: dict[str, Any] = {"maxTokens": request.max_tokens}
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if request.top_p is not None:
        inference["topP"] = request.top_p
    if request.stop:
        inference["stopSequences"] = list(request.stop)
    params: dict[str, Any] = {
        "modelId": request.model,
        "messages": [_message(m) for m in conversation],
        "inferenceConfig": inference,
    }
    if system:
        params["system"] = [{"text": text} for text in system]
    if request.labels:
        params["requestMetadata"] = dict(request.labels)
    return params


def transport_error(exc: Exception) -> ProviderError:
    """Connection failures and timeouts count as `timeout`; anything else at the transport as `unavailable`."""
    connection = isinstance(exc, OSError)
    reason = FailureReason.TIMEOUT if connection else FailureReason.UNAVAILABLE
    return ProviderError(reason, f"{type(exc).__name__}: {exc}", code=type(exc).__name__)


def _message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "content": [{"text": message.content}]}


def _usage(usage: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=int(usage.get("inputTokens", 0)), output_tokens=int(usage.get("outputTokens", 0))
    )


def _served_tier(response: dict[str, Any], tier: Tier) -> str:
    service_tier = response.get("serviceTier")
    if isinstance(service_tier, dict) and service_tier.get("type"):
        return str(service_tier["type"])
    return tier.value
