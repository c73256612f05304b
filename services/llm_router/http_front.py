"""The OpenAI-compatible HTTP front: `POST /v1/chat/completions` (SSE when `stream: true`), `GET /v1/models`,
and `/metrics`.

The feature is the `X-Podway-Feature` header or a `model` of the form `feature:<name>`. Callers present a bearer
key from the policy's `api_keys` (the key is the map's key), limited to its features: an unknown key is 401, a
feature outside its list 403. A feature or a key over its budget, or a key over its request rate, is 429 with
`Retry-After` (when the allowance will have room), as is expected of an OpenAI endpoint; a request above a whole
minute of a budget is 400, since it could never be admitted; a router at its in-flight cap is 503 with `Retry-After`. Errors use OpenAI's error JSON.

Streaming: the first event is awaited before the response starts, so failover before the first byte is
invisible and a request nobody could answer is an HTTP error. After that, a failure is sent as an SSE `error`
object and the stream ends without `[DONE]`: a client never mistakes a broken answer for a complete one.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import AsyncGenerator
from typing import Any

import orjson

from libs.events.inference import MAX_REQUEST_ID_LENGTH
from libs.router import (
    BudgetExceeded,
    InferRequest,
    InferResult,
    Router,
    RoutingError,
    StreamCompleted,
    StreamEvent,
    TextDelta,
    new_request_id,
)
from libs.runtime.http_server import Handler, HttpRequest, HttpResponse, ResponseStream
from services.llm_router.chat_request import InvalidParameter, chat_request
from services.llm_router.metrics import CONTENT_TYPE, RouterMetrics
from services.llm_router.overload import InFlightCap, Overloaded
from services.llm_router.wire import ROUTER_REPORTED

log = logging.getLogger(__name__)

FEATURE_HEADER = "X-Podway-Feature"
REQUEST_ID_HEADER = "X-Request-Id"
FEATURE_MODEL_PREFIX = "feature:"
REQUEST_ID = re.compile(f"[!-~]{{1,{MAX_REQUEST_ID_LENGTH}}}")  # visible ASCII: no space, no control
BAD_REQUEST_ID = (
    f"{REQUEST_ID_HEADER}: must be 1 to {MAX_REQUEST_ID_LENGTH} visible ASCII characters "
    "(letters, digits, punctuation)"
)
FINISH_REASONS = {"max_tokens": "length", "MAX_TOKENS": "length", "length": "length"}


class ApiError(Exception):
    """An error answered in OpenAI's format."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str,
        code: str,
        retry_after_s: float | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.code = code
        self.param = param
        self.retry_after_s = retry_after_s
        self.headers = headers
        self.request_id: str | None = None

    def response(self) -> HttpResponse:
        body = {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}
        headers = list(self.headers)
        if self.request_id is not None:
            headers.append((REQUEST_ID_HEADER, self.request_id))
        if self.retry_after_s is not None:
            headers.append(("Retry-After", str(max(1, math.ceil(self.retry_after_s)))))
        return _json_response(body, status=self.status, headers=headers)


class OpenAIFront:
    """The front's handler for `libs.runtime.http_server`: routes by path, answers errors in OpenAI's format."""

    def __init__(self, router: Router, cap: InFlightCap, metrics: RouterMetrics) -> None:
        self.router = router
        self.cap = cap
        self.metrics = metrics
        self._routes = {
            "/v1/chat/completions": ("POST", self.chat_completions),
            "/v1/models": ("GET", self.list_models),
            "/metrics": ("GET", self.metrics_page),
        }
        self._in_flight: set[str] = set()

    def check_head(self, method: str, path: str, headers: dict[str, str]) -> HttpResponse | None:
        """What a request waiting for `100 Continue` is refused from its head alone: no route, a method not
        allowed, or (on the answering routes) a key not in the policy. Its body is then never sent."""
        try:
            _, wanted = self._route(method, path)
            if wanted != "/metrics":
                _caller(headers, self.router)
        except ApiError as exc:
            return exc.response()
        return None

    def _route(self, method: str, path: str) -> tuple[Handler, str]:
        name = path.rstrip("/") or "/"
        route = self._routes.get(name)
        if route is None:
            raise ApiError(404, f"no route {path}", type_="invalid_request_error", code="not_found")
        allowed, handle = route
        # HEAD is GET without the body (the server leaves it out), as HTTP wants of every GET resource.
        if method != allowed and not (method == "HEAD" and allowed == "GET"):
            raise ApiError(
                405,
                f"{method} is not allowed on {path}",
                type_="invalid_request_error",
                code="method_not_allowed",
                headers=(("Allow", f"{allowed}, HEAD" if allowed == "GET" else allowed),),
            )
        return handle, name

    async def __call__(self, request: HttpRequest) -> HttpResponse | None:
        try:
            handle, _ = self._route(request.method, request.path)
        except ApiError as exc:
            return exc.response()
        try:
            return await handle(request)
        except ApiError as exc:
            return exc.response()
        except Exception as exc:
            if request.streaming:
                raise  # the server cuts the stream short
            return _internal_error(request, exc).response()

    async def metrics_page(self, request: HttpRequest) -> HttpResponse:
        return metrics_response(self.metrics)

    async def list_models(self, request: HttpRequest) -> HttpResponse:
        """The features the key may use, as `feature:<name>` model ids."""
        _, features = _caller(request.headers, self.router)
        data = [
            {"id": f"{FEATURE_MODEL_PREFIX}{name}", "object": "model", "created": 0, "owned_by": "podway"}
            for name in features
        ]
        return _json_response({"object": "list", "data": data})

    async def chat_completions(self, request: HttpRequest) -> HttpResponse | None:
        """Every answer carries the request's id, the caller's (`X-Request-Id`) or a fresh one; an id in flight
        in this process is refused (409): two requests under one id would write their stories into each other.
        An id reused once its request is answered starts a second story under it (a retry, say)."""
        sent = request.headers.get(REQUEST_ID_HEADER.lower())
        if not sent:
            request_id = new_request_id()
        elif REQUEST_ID.fullmatch(sent):
            request_id = sent
        else:  # a header has no character set: a UTF-8 id would be stored as its bytes read in Latin-1
            raise _with_id(_invalid(BAD_REQUEST_ID), new_request_id())
        if request_id in self._in_flight:
            raise _with_id(
                ApiError(
                    409,
                    f"{REQUEST_ID_HEADER}: request {request_id!r} is in flight; send another id, or the same "
                    "once it is answered",
                    type_="invalid_request_error",
                    code="request_id_in_use",
                ),
                request_id,
            )
        self._in_flight.add(request_id)
        try:
            return await self._chat_completions(request, request_id)
        except ApiError as exc:
            _with_id(exc, request_id)
            raise
        except Exception as exc:
            if request.streaming:
                raise
            raise _with_id(_internal_error(request, exc), request_id) from None
        finally:
            self._in_flight.discard(request_id)

    async def _chat_completions(self, request: HttpRequest, request_id: str) -> HttpResponse | None:
        router, cap, metrics = self.router, self.cap, self.metrics
        key, allowed = _caller(request.headers, router)
        body = _json_body(request)
        feature = _feature(request, body)
        if feature not in allowed:
            metrics.refused(feature, "forbidden", router.policy.features)
            raise ApiError(
                403,
                f"this key may not use feature {feature!r}",
                type_="invalid_request_error",
                code="feature_not_allowed",
            )
        try:
            infer, include_usage = chat_request(body, feature, key, request_id)
        except InvalidParameter as exc:
            raise ApiError(
                400, str(exc), type_="invalid_request_error", code=exc.code, param=exc.param
            ) from None
        try:
            with cap.admit():
                if infer.stream:
                    await _stream(request, router, infer, include_usage)
                    return None
                result = await router.infer(infer)
        except (Overloaded, RoutingError) as exc:
            if not isinstance(exc, ROUTER_REPORTED):
                metrics.refused(feature, exc.reason, router.policy.features)
            raise _api_error(exc) from exc
        return _json_response(_completion(result), headers=[(REQUEST_ID_HEADER, result.request_id)])


class MetricsOnly:
    """Only `/metrics`, for the service's metrics port."""

    def __init__(self, metrics: RouterMetrics) -> None:
        self.metrics = metrics

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path != "/metrics":
            return HttpResponse(404, b"not found", content_type="text/plain")
        return metrics_response(self.metrics)


def metrics_response(metrics: RouterMetrics) -> HttpResponse:
    return HttpResponse(200, metrics.exposition(), content_type=CONTENT_TYPE)


def _caller(headers: dict[str, str], router: Router) -> tuple[str, tuple[str, ...]]:
    """The bearer key and the features it may use."""
    header = headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    api_key = router.policy.api_keys.get(key) if scheme.lower() == "bearer" else None
    if api_key is None:
        raise ApiError(
            401, "Incorrect API key provided.", type_="invalid_request_error", code="invalid_api_key"
        )
    return key, api_key.features


def _json_response(
    body: Any, *, status: int = 200, headers: list[tuple[str, str]] | None = None
) -> HttpResponse:
    return HttpResponse(status, orjson.dumps(body), headers or ())


def _json_body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = orjson.loads(request.body)
    except orjson.JSONDecodeError as exc:
        raise _invalid(f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise _invalid("request body must be a JSON object")
    return body


def _invalid(message: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, type_="invalid_request_error", code=code)


def _with_id(error: ApiError, request_id: str) -> ApiError:
    error.request_id = request_id  # so that a failure can be looked up (`podway events --request`)
    return error


def _internal_error(request: HttpRequest, exc: Exception) -> ApiError:
    log.exception("%s %s failed", request.method, request.path, exc_info=exc)
    return ApiError(500, f"{type(exc).__name__}: {exc}", type_="server_error", code="internal_error")


def _feature(request: HttpRequest, body: dict[str, Any]) -> str:
    feature = request.headers.get(FEATURE_HEADER.lower())
    model = body.get("model")
    if not feature and isinstance(model, str) and model.startswith(FEATURE_MODEL_PREFIX):
        feature = model.removeprefix(FEATURE_MODEL_PREFIX)
    if not feature:
        raise _invalid(f"name the feature in the {FEATURE_HEADER} header or as model 'feature:<name>'")
    return feature


def _api_error(exc: Overloaded | RoutingError) -> ApiError:
    if isinstance(exc, Overloaded):
        return ApiError(503, str(exc), type_="server_error", code=exc.reason, retry_after_s=exc.retry_after_s)
    if isinstance(exc, BudgetExceeded):
        return ApiError(
            429,
            str(exc),
            type_="rate_limit_error",
            code="rate_limit_exceeded",
            retry_after_s=exc.retry_after_s,
        )
    type_ = "invalid_request_error" if exc.http_status < 500 else "server_error"
    return ApiError(exc.http_status, str(exc), type_=type_, code=exc.reason)


def _usage(result: InferResult) -> dict[str, int]:
    usage = result.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def _podway(result: InferResult) -> dict[str, Any]:
    """Which deployment answered, on which capacity, and after which attempts."""
    return {
        "request_id": result.request_id,
        "feature": result.feature,
        "deployment": result.deployment,
        "provider": result.provider,
        "served_tier": result.served_tier,
        "attempts": [
            {"deployment": a.deployment, "reason": a.reason.value if a.reason else "ok", "status": a.status}
            for a in result.attempts
        ],
    }


def _finish_reason(result: InferResult) -> str:
    return FINISH_REASONS.get(result.stop_reason or "", "stop")


def _completion(result: InferResult) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{result.request_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": result.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.text},
                "finish_reason": _finish_reason(result),
            }
        ],
        "usage": _usage(result),
        "podway": _podway(result),
    }


async def _stream(request: HttpRequest, router: Router, infer: InferRequest, include_usage: bool) -> None:
    events = router.stream(infer)
    try:
        first = await anext(events)  # failover before the first byte happens in here, unseen by the client
        response = await request.stream(
            200,
            [
                ("Content-Type", "text/event-stream"),
                ("Cache-Control", "no-cache"),
                (REQUEST_ID_HEADER, infer.request_id),
            ],
        )
        await _relay(response, infer, first, events, include_usage)
    finally:
        await events.aclose()


async def _relay(
    response: ResponseStream,
    infer: InferRequest,
    first: StreamEvent,
    events: AsyncGenerator[StreamEvent, None],
    include_usage: bool,
) -> None:
    chunk_id = f"chatcmpl-{infer.request_id}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        payload = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "choices": [choice]}
        return _sse(payload | extra)

    opening = chunk({"role": "assistant", "content": ""})  # goes out with the first text: one write
    event: StreamEvent = first
    try:
        while isinstance(event, TextDelta):
            await response.write(opening + chunk({"content": event.text}))
            opening = b""
            event = await anext(events)
    except RoutingError as exc:  # the stream broke after text went out: say so, and no [DONE]
        await response.write(
            _sse({"error": {"message": str(exc), "type": "server_error", "code": exc.reason}})
        )
        return
    assert isinstance(event, StreamCompleted)
    result = event.result
    await response.write(
        opening + chunk({}, _finish_reason(result), model=result.model, podway=_podway(result))
    )
    if include_usage:
        usage = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "choices": []}
        await response.write(_sse(usage | {"usage": _usage(result)}))
    await response.write(b"data: [DONE]\n\n")


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"
