"""Vertex AI emulator: generateContent, streamGenerateContent (JSON array for the SDK, SSE with `alt=sse`) and
an OAuth token endpoint, as google-cloud-aiplatform's REST transports parse them.

The header `X-Vertex-AI-LLM-Request-Type` picks the pool: `dedicated` = provisioned only (over capacity:
429 RESOURCE_EXHAUSTED), `shared` = on-demand only, absent = provisioned, spilling to on-demand when full;
`usageMetadata.trafficType` says which pool served.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from libs.emulators.control import (
    ON_DEMAND,
    PROVISIONED,
    EmulatorControl,
    MidStreamKnob,
    Pool,
    Refusal,
    input_tokens,
    stop_sequences,
    stopped_answer,
    unit_fraction,
)
from libs.emulators.routes import CONTROL_KEY, add_control_routes

REQUEST_TYPE_HEADER = "X-Vertex-AI-LLM-Request-Type"
DEFAULT_MAX_TOKENS = 512
MAX_STOP_SEQUENCES = 5  # generateContent's limit

_POOLS: dict[str, tuple[Pool, ...]] = {
    "dedicated": (PROVISIONED,),
    "shared": (ON_DEMAND,),
    "": (PROVISIONED, ON_DEMAND),
}
_TRAFFIC_TYPE = {PROVISIONED: "PROVISIONED_THROUGHPUT", ON_DEMAND: "ON_DEMAND"}
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def create_vertex_app(control: EmulatorControl) -> web.Application:
    """The aiohttp application serving Vertex AI generative endpoints plus the `/__emulator` control endpoints."""
    app = web.Application()
    app.router.add_post("/v1/{rest:.+}", _dispatch)
    app.router.add_post("/token", _token)
    add_control_routes(app, control)
    return app


async def _token(_: web.Request) -> web.Response:
    return web.json_response({"access_token": "emulator-token", "expires_in": 3600, "token_type": "Bearer"})


async def _dispatch(request: web.Request) -> web.StreamResponse:
    resource, _, method = request.match_info["rest"].rpartition(":")
    model = resource.rsplit("/", 1)[-1]
    control = request.app[CONTROL_KEY]
    if "/publishers/" not in resource or method not in ("generateContent", "streamGenerateContent"):
        return _error(404, f"unknown resource {resource}:{method}")
    pools = _POOLS.get(request.headers.get(REQUEST_TYPE_HEADER, "").lower())
    if pools is None:
        return _error(400, f"invalid {REQUEST_TYPE_HEADER}")
    try:
        body = await request.json()
        texts, max_tokens, stop = _prompt(body)
    except (ValueError, KeyError, TypeError) as exc:
        control.count(model, "invalid")
        return _error(400, f"Invalid request: {exc}")
    control.receive(model, body)
    n_in, n_out = input_tokens(texts), min(max_tokens, control.output_tokens)
    verdict = control.admit(model, pools, n_in + n_out)
    if isinstance(verdict, Refusal):
        return _refusal(verdict)
    tokens, _ = stopped_answer(n_out, stop)  # a stop sequence ends the answer with finishReason STOP too
    try:
        if method == "generateContent":
            return await _generate(control, model, n_in, tokens, verdict.pool)
        sse = request.query.get("alt") == "sse"
        return await _stream(request, control, model, n_in, tokens, verdict.pool, sse=sse)
    finally:
        verdict.release()


def _prompt(body: dict[str, Any]) -> tuple[list[str], int, list[str]]:
    contents = body["contents"]
    if not isinstance(contents, list) or not contents:
        raise ValueError("contents must be a non-empty list")
    texts = [part["text"] for content in contents for part in content["parts"] if "text" in part]
    texts += [part["text"] for part in body.get("systemInstruction", {}).get("parts", []) if "text" in part]
    config = body.get("generationConfig", {})
    max_tokens = int(config.get("maxOutputTokens", DEFAULT_MAX_TOKENS))
    if max_tokens < 1:
        raise ValueError("generationConfig.maxOutputTokens must be >= 1")
    unit_fraction(config, "topP")
    return texts, max_tokens, stop_sequences(config, "stopSequences", MAX_STOP_SEQUENCES)


def _response(model: str, text: str, usage: tuple[int, int] | None, pool: Pool, done: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0, "content": {"role": "model", "parts": [{"text": text}]}}
    if done:
        candidate["finishReason"] = "STOP"
    response: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": model,
        "responseId": uuid.uuid4().hex,
    }
    if usage is not None:
        n_in, n_out = usage
        response["usageMetadata"] = {
            "promptTokenCount": n_in,
            "candidatesTokenCount": n_out,
            "totalTokenCount": n_in + n_out,
            "trafficType": _TRAFFIC_TYPE[pool],
        }
    return response


async def _generate(
    control: EmulatorControl, model: str, n_in: int, tokens: list[str], pool: Pool
) -> web.Response:
    n_out = len(tokens)
    first, per_token = control.delays(model, n_out)
    delay = first + per_token * (n_out - 1)
    if delay:
        await asyncio.sleep(delay)
    control.count(model, "ok")
    return web.json_response(_response(model, "".join(tokens), (n_in, n_out), pool, done=True))


async def _stream(
    request: web.Request,
    control: EmulatorControl,
    model: str,
    n_in: int,
    tokens: list[str],
    pool: Pool,
    *,
    sse: bool,
) -> web.StreamResponse:
    failure = control.mid_stream_failure(model)
    content_type = "text/event-stream" if sse else "application/json"
    response = web.StreamResponse(headers={"Content-Type": content_type})
    await response.prepare(request)
    framing = _sse_frames if sse else _array_frames
    async for frame in framing(_stream_objects(control, model, n_in, tokens, pool, failure)):
        await response.write(frame)
    await response.write_eof()
    if failure is None:
        control.count(model, "ok")
    return response


async def _stream_objects(
    control: EmulatorControl,
    model: str,
    n_in: int,
    tokens: list[str],
    pool: Pool,
    failure: MidStreamKnob | None,
) -> AsyncIterator[dict[str, Any] | None]:
    """Response objects; a trailing None marks a broken stream (the error object comes just before it)."""
    usage = (n_in, len(tokens))
    first, per_token = control.delays(model, len(tokens))
    for index, token in enumerate(tokens):
        if failure is not None and index == failure.after_chunks:
            yield {
                "error": {
                    "code": 503,
                    "message": "The stream was interrupted (emulated).",
                    "status": "UNAVAILABLE",
                }
            }
            yield None
            return
        delay = first if index == 0 else per_token
        if delay:
            await asyncio.sleep(delay)
        last = index == len(tokens) - 1
        yield _response(model, token, usage if last else None, pool, done=last)
    if not tokens:  # stopped before its first word: one closing object still carries the usage
        yield _response(model, "", usage, pool, done=True)


async def _array_frames(objects: AsyncIterator[dict[str, Any] | None]) -> AsyncIterator[bytes]:
    # A broken stream never closes the array, which the SDK reports as an unfinished stream.
    separator = b"["
    async for obj in objects:
        if obj is None:
            return
        yield separator + json.dumps(obj).encode() + b"\n"
        separator = b","
    yield b"]" if separator == b"," else b"[]"


async def _sse_frames(objects: AsyncIterator[dict[str, Any] | None]) -> AsyncIterator[bytes]:
    async for obj in objects:
        if obj is None:
            return
        yield b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"


def _refusal(refusal: Refusal) -> web.Response:
    if refusal.kind == "capacity":
        message = (
            "Too many requests. Exceeded the Provisioned Throughput."
            if refusal.pool == PROVISIONED
            else "Resource exhausted. Please try again later."
        )
        return _error(429, message)
    return _error(refusal.status, refusal.message, refusal.code)


def _error(status: int, message: str, status_name: str | None = None) -> web.Response:
    name = status_name or _STATUS_NAMES.get(status, "UNKNOWN")
    return web.json_response({"error": {"code": status, "message": message, "status": name}}, status=status)
