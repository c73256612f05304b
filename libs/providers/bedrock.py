"""AWS Bedrock Runtime through aiobotocore: Converse and ConverseStream on one pooled, long-lived client.

SDK retries are off (`total_max_attempts: 1`; `max_attempts: 1` would still retry once): the router is the only
retry loop. botocore still asks its retry handler after every call; the `standard` mode's handler does less per
call than the legacy one. PT deployments pass their provisioned-model ARN as modelId.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

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

_CONNECTION_ERRORS = (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError)
_session: Any = None


def _shared_session() -> Any:
    """One botocore session per process: its loader caches the parsed service model (~1 s per client otherwise)."""
    global _session
    if _session is None:
        _session = get_session()
    return _session


class BedrockProvider:
    """Provider for one Bedrock region (or its emulator)."""

    def __init__(self, name: str, client: Any, exit_stack: contextlib.AsyncExitStack) -> None:
        self.name = name
        self._client = client
        self._exit_stack = exit_stack

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
        _memoise_user_agent(client)
        return cls(name, client, stack)

    async def aclose(self) -> None:
        """Close the client and its connection pool."""
        await self._exit_stack.aclose()

    async def complete(self, request: ProviderRequest) -> Completion:
        """Converse: one whole answer."""
        started = time.perf_counter()
        try:
            response = await self._client.converse(**converse_params(request))
        except ClientError as exc:
            raise client_error(exc, request.tier) from None
        except (BotoCoreError, aiohttp.ClientError, OSError) as exc:
            raise transport_error(exc) from None
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
        try:
            response = await self._client.converse_stream(**converse_params(request))
        except ClientError as exc:
            raise client_error(exc, request.tier) from None
        except (BotoCoreError, aiohttp.ClientError, OSError) as exc:
            raise transport_error(exc) from None
        events = response["stream"]
        usage: Usage | None = None
        stop_reason = served = None
        try:
            async for event in events:
                if "contentBlockDelta" in event:
                    text = event["contentBlockDelta"]["delta"].get("text")
                    if text:
                        yield Chunk(text)
                elif "messageStop" in event:
                    stop_reason = event["messageStop"].get("stopReason")
                elif "metadata" in event:
                    usage = _usage(event["metadata"]["usage"])
                    served = _served_tier(event["metadata"], request.tier)
        except ClientError as exc:
            raise client_error(exc, request.tier) from None
        except (BotoCoreError, aiohttp.ClientError, OSError) as exc:
            raise transport_error(exc) from None
        finally:
            events.close()
        if usage is None:
            raise ProviderError(FailureReason.UNAVAILABLE, "stream ended without its metadata event")
        yield Chunk("", usage=usage, served_tier=served, stop_reason=stop_reason)


def _memoise_user_agent(client: Any) -> None:
    """botocore rebuilds the same User-Agent string twice per call (~0.6 ms of CPU); build it once per client.

    Only the per-request feature ids of the telemetry string are lost. A botocore without the attribute is
    left as it is."""
    creator = getattr(client, "_user_agent_creator", None)
    if creator is not None and hasattr(creator, "to_string"):
        user_agent = creator.to_string()
        creator.to_string = lambda: user_agent


def converse_params(request: ProviderRequest) -> dict[str, Any]:
    """The Converse request for a ProviderRequest."""
    system, conversation = split_system(request.messages)
    inference: dict[str, Any] = {"maxTokens": request.max_tokens}
    if request.temperature is not None:
        inference["temperature"] = request.temperature
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


def client_error(exc: ClientError, tier: Tier) -> ProviderError:
    """Normalise a Bedrock error response or in-stream exception; the code decides before the status."""
    error = exc.response.get("Error", {})
    code = error.get("Code")
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    reason = classify_bedrock(status, code, tier)
    return ProviderError(reason, error.get("Message") or str(exc), status=status, code=code)


def transport_error(exc: Exception) -> ProviderError:
    """Connection failures and timeouts count as `timeout`; anything else at the transport as `unavailable`."""
    connection = isinstance(exc, (*_CONNECTION_ERRORS, aiohttp.ClientConnectionError, OSError))
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
