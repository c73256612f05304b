"""Bedrock Runtime emulator: Converse and ConverseStream (rest-json, binary eventstream), as botocore parses them.

A modelId that is a provisioned-model ARN is served from the `provisioned` pool (over capacity: 429
ThrottlingException); any other modelId from `on_demand`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from libs.emulators import eventstream
from libs.emulators.control import (
    ON_DEMAND,
    PROVISIONED,
    EmulatorControl,
    Pool,
    Refusal,
    input_tokens,
    stop_sequences,
    stopped_answer,
    unit_fraction,
)
from libs.emulators.routes import CONTROL_KEY, add_control_routes

DEFAULT_MAX_TOKENS = 512
MAX_STOP_SEQUENCES = 2500  # Converse's own limit (a model may take fewer)

_REFUSAL_CODES = {
    "capacity": "ThrottlingException",
    "outage": "ServiceUnavailableException",
}
_CAPACITY_MESSAGE = "Too many tokens, please wait before trying again."


def is_provisioned_arn(model_id: str) -> bool:
    """Provisioned-throughput model ARNs look like `arn:aws:bedrock:REGION:ACCOUNT:provisioned-model/ID`."""
    return model_id.startswith("arn:") and ":provisioned-model/" in model_id


def create_bedrock_app(control: EmulatorControl) -> web.Application:
    """The aiohttp application serving Bedrock Runtime plus the `/__emulator` control endpoints."""
    app = web.Application()
    app.router.add_post("/model/{rest:.+}", _dispatch)
    add_control_routes(app, control)
    return app


async def _dispatch(request: web.Request) -> web.StreamResponse:
    # The modelId may be a URL-encoded ARN containing '/', so split the raw path ourselves.
    raw = request.raw_path.split("?", 1)[0].removeprefix("/model/")
    encoded_id, _, operation = raw.rpartition("/")
    model_id = unquote(encoded_id)
    control = request.app[CONTROL_KEY]
    if operation not in ("converse", "converse-stream"):
        return _error(404, "UnknownOperationException", f"unknown operation {operation}")
    try:
        body = await request.json()
        texts, max_tokens, stop = _prompt(body)
    except (ValueError, KeyError, TypeError) as exc:
        control.count(model_id, "invalid")
        return _error(400, "ValidationException", f"Malformed input request: {exc}")
    control.receive(model_id, body)
    pool: Pool = PROVISIONED if is_provisioned_arn(model_id) else ON_DEMAND
    n_in, n_out = input_tokens(texts), min(max_tokens, control.output_tokens)
    verdict = control.admit(model_id, (pool,), n_in + n_out)
    if isinstance(verdict, Refusal):
        return _refusal(verdict)
    tokens, stopped = stopped_answer(n_out, stop)
    stop_reason = (
        "stop_sequence" if stopped else "end_turn" if n_out == control.output_tokens else "max_tokens"
    )
    try:
        if operation == "converse":
            return await _converse(control, model_id, n_in, tokens, stop_reason)
        return await _converse_stream(request, control, model_id, n_in, tokens, stop_reason)
    finally:
        verdict.release()


def _prompt(body: dict[str, Any]) -> tuple[list[str], int, list[str]]:
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    texts = [block["text"] for message in messages for block in message["content"] if "text" in block]
    texts += [block["text"] for block in body.get("system", []) if "text" in block]
    config = body.get("inferenceConfig", {})
    max_tokens = int(config.get("maxTokens", DEFAULT_MAX_TOKENS))
    if max_tokens < 1:
        raise ValueError("inferenceConfig.maxTokens must be >= 1")
    unit_fraction(config, "topP")
    return texts, max_tokens, stop_sequences(config, "stopSequences", MAX_STOP_SEQUENCES)


async def _converse(
    control: EmulatorControl, model_id: str, n_in: int, tokens: list[str], stop_reason: str
) -> web.Response:
    started = time.monotonic()
    n_out = len(tokens)
    first, per_token = control.delays(model_id, n_out)
    delay = first + per_token * (n_out - 1)
    if delay:
        await asyncio.sleep(delay)
    control.count(model_id, "ok")
    return web.json_response(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "".join(tokens)}]}},
            "stopReason": stop_reason,
            "usage": {"inputTokens": n_in, "outputTokens": n_out, "totalTokens": n_in + n_out},
            "metrics": {"latencyMs": int((time.monotonic() - started) * 1000)},
        },
        headers={"x-amzn-RequestId": str(uuid.uuid4())},
    )


async def _converse_stream(
    request: web.Request,
    control: EmulatorControl,
    model_id: str,
    n_in: int,
    tokens: list[str],
    stop_reason: str,
) -> web.StreamResponse:
    started = time.monotonic()
    n_out = len(tokens)
    failure = control.mid_stream_failure(model_id)
    first, per_token = control.delays(model_id, n_out)
    response = web.StreamResponse(
        headers={"Content-Type": "application/vnd.amazon.eventstream", "x-amzn-RequestId": str(uuid.uuid4())}
    )
    await response.prepare(request)
    await response.write(eventstream.event("messageStart", {"role": "assistant"}))
    for index, token in enumerate(tokens):
        if failure is not None and index == failure.after_chunks:
            code = failure.code or "modelStreamErrorException"
            await response.write(eventstream.exception(code, "The model stream failed (emulated)."))
            await response.write_eof()
            return response
        delay = first if index == 0 else per_token
        if delay:
            await asyncio.sleep(delay)
        delta = {"contentBlockIndex": 0, "delta": {"text": token}}
        await response.write(eventstream.event("contentBlockDelta", delta))
    await response.write(eventstream.event("contentBlockStop", {"contentBlockIndex": 0}))
    await response.write(eventstream.event("messageStop", {"stopReason": stop_reason}))
    metadata = {
        "usage": {"inputTokens": n_in, "outputTokens": n_out, "totalTokens": n_in + n_out},
        "metrics": {"latencyMs": int((time.monotonic() - started) * 1000)},
    }
    await response.write(eventstream.event("metadata", metadata))
    await response.write_eof()
    control.count(model_id, "ok")
    return response


def _refusal(refusal: Refusal) -> web.Response:
    code = refusal.code or _REFUSAL_CODES.get(refusal.kind, "InternalServerException")
    message = _CAPACITY_MESSAGE if refusal.kind == "capacity" else refusal.message
    return _error(refusal.status, code, message)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps({"message": message}).encode(),
        headers={
            "Content-Type": "application/json",
            "x-amzn-ErrorType": code,
            "x-amzn-RequestId": str(uuid.uuid4()),
        },
    )
