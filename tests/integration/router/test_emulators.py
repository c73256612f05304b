"""The emulators' own contract: control endpoints, OAuth token, SSE framing, pools and injected time."""

from __future__ import annotations

import json

import aiohttp
from botocore.eventstream import EventStreamBuffer

from libs.emulators import RunningEmulators, serve
from libs.emulators.control import Grant, Refusal
from libs.emulators.eventstream import event, exception
from libs.router.example_policy import CLAUDE_HAIKU_OD, CLAUDE_HAIKU_PT_ARN, GEMINI_FLASH

VERTEX_PATH = f"/v1/projects/acme-ai/locations/us-central1/publishers/google/models/{GEMINI_FLASH}"
VERTEX_BODY = {
    "contents": [{"role": "user", "parts": [{"text": "hello"}]}],
    "generationConfig": {"maxOutputTokens": 3},
}


def test_eventstream_frames_pass_botocores_crc_checks() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(
        event("contentBlockDelta", {"delta": {"text": "hi"}}) + exception("throttlingException", "slow")
    )
    first, second = list(buffer)
    assert first.headers[":event-type"] == "contentBlockDelta"
    assert json.loads(first.payload) == {"delta": {"text": "hi"}}
    assert (second.headers[":message-type"], second.headers[":exception-type"]) == (
        "exception",
        "throttlingException",
    )


async def test_control_endpoints_turn_the_same_knobs_as_the_python_api(emulators: RunningEmulators) -> None:
    async with aiohttp.ClientSession(emulators.vertex_url) as http:
        knob = {"model": GEMINI_FLASH, "pool": "provisioned", "tokens_per_minute": 1}
        assert (await http.post("/__emulator/capacity", json=knob)).status == 200
        refused = await http.post(
            f"{VERTEX_PATH}:generateContent",
            json=VERTEX_BODY,
            headers={"X-Vertex-AI-LLM-Request-Type": "dedicated"},
        )
        assert refused.status == 429
        assert (await refused.json())["error"]["status"] == "RESOURCE_EXHAUSTED"
        spilled = await http.post(f"{VERTEX_PATH}:generateContent", json=VERTEX_BODY)
        assert (await spilled.json())["usageMetadata"]["trafficType"] == "ON_DEMAND"
        bad = await http.post("/__emulator/errors", json={"status": 200, "code": "x"})
        assert bad.status == 400
        counters = await (await http.get("/__emulator/counters")).json()
    assert counters["models"][GEMINI_FLASH] == {
        "requests": 2,
        "throttled_provisioned": 1,
        "served_on_demand": 1,
        "ok": 1,
    }


async def test_vertex_answers_an_oauth_token(emulators: RunningEmulators) -> None:
    async with aiohttp.ClientSession(emulators.vertex_url) as http:
        token = await (await http.post("/token", data={"grant_type": "x"})).json()
    assert token["token_type"] == "Bearer"
    assert token["expires_in"] > 0


async def test_vertex_streams_server_sent_events_with_alt_sse(emulators: RunningEmulators) -> None:
    async with aiohttp.ClientSession(emulators.vertex_url) as http:
        response = await http.post(f"{VERTEX_PATH}:streamGenerateContent?alt=sse", json=VERTEX_BODY)
        body = (await response.read()).decode()
    assert response.headers["Content-Type"].startswith("text/event-stream")
    frames = [json.loads(line.removeprefix("data: ")) for line in body.split("\r\n\r\n") if line]
    assert [f["candidates"][0]["content"]["parts"][0]["text"] for f in frames] == [
        "alpha ",
        "bravo ",
        "charlie ",
    ]
    assert frames[-1]["usageMetadata"]["trafficType"] == "PROVISIONED_THROUGHPUT"


async def test_capacity_refills_on_the_injected_clock() -> None:
    now = [0.0]
    running = await serve(clock=lambda: now[0])
    try:
        running.bedrock.set_capacity(CLAUDE_HAIKU_PT_ARN, "provisioned", tokens_per_minute=60)
        assert isinstance(running.bedrock.admit(CLAUDE_HAIKU_PT_ARN, ("provisioned",), 60), Grant)
        assert (
            running.bedrock.admit(CLAUDE_HAIKU_PT_ARN, ("provisioned",), 10).__class__.__name__ == "Refusal"
        )
        now[0] = 10.0
        assert isinstance(running.bedrock.admit(CLAUDE_HAIKU_PT_ARN, ("provisioned",), 10), Grant)
        running.bedrock.start_outage(duration_s=5)
        assert isinstance(running.bedrock.admit(CLAUDE_HAIKU_PT_ARN, ("provisioned",), 1), Refusal)
        now[0] = 15.0
        assert isinstance(running.bedrock.admit(CLAUDE_HAIKU_PT_ARN, ("provisioned",), 1), Grant)
    finally:
        await running.close()


async def test_error_rate_injection_is_seeded(emulators: RunningEmulators) -> None:
    emulators.bedrock.inject_error(500, "InternalServerException", rate=0.5)
    refused = sum(isinstance(emulators.bedrock.admit("m", ("on_demand",), 1), Refusal) for _ in range(200))
    assert 70 < refused < 130


async def test_on_demand_throttles_above_its_request_rate() -> None:
    now = [0.0]
    running = await serve(clock=lambda: now[0])
    try:
        running.vertex.set_capacity(GEMINI_FLASH, "on_demand", requests_per_second=2)
        verdicts = [running.vertex.admit(GEMINI_FLASH, ("on_demand",), 1) for _ in range(3)]
        for verdict in verdicts:
            if isinstance(verdict, Grant):
                verdict.release()
        assert [type(v) for v in verdicts] == [Grant, Grant, Refusal]
        now[0] = 0.5
        assert isinstance(running.vertex.admit(GEMINI_FLASH, ("on_demand",), 1), Grant)
    finally:
        await running.close()


BEDROCK_PATH = f"/model/{CLAUDE_HAIKU_OD}"
STOP_AT_CHARLIE = ["charlie", "no such words"]


async def test_bedrock_stops_at_a_stop_sequence_and_keeps_the_request(emulators: RunningEmulators) -> None:
    body = {
        "messages": [{"role": "user", "content": [{"text": "hello"}]}],
        "inferenceConfig": {"maxTokens": 8, "stopSequences": STOP_AT_CHARLIE, "topP": 0.5},
    }
    async with aiohttp.ClientSession(emulators.bedrock_url) as http:
        answer = await (await http.post(f"{BEDROCK_PATH}/converse", json=body)).json()
        streamed = await (await http.post(f"{BEDROCK_PATH}/converse-stream", json=body)).read()
        refused = await http.post(
            f"{BEDROCK_PATH}/converse", json=body | {"inferenceConfig": {"stopSequences": [""]}}
        )
    assert answer["output"]["message"]["content"] == [{"text": "alpha bravo "}]
    assert (answer["stopReason"], answer["usage"]["outputTokens"]) == ("stop_sequence", 2)
    buffer = EventStreamBuffer()
    buffer.add_data(streamed)
    events = {m.headers[":event-type"]: json.loads(m.payload) for m in buffer}
    assert events["messageStop"] == {"stopReason": "stop_sequence"}
    assert events["metadata"]["usage"]["outputTokens"] == 2
    assert emulators.bedrock.requests(CLAUDE_HAIKU_OD)[0]["inferenceConfig"] == body["inferenceConfig"]
    assert (refused.status, refused.headers["x-amzn-ErrorType"]) == (400, "ValidationException")


async def test_vertex_stops_at_a_stop_sequence_and_keeps_the_request(emulators: RunningEmulators) -> None:
    config = {"maxOutputTokens": 8, "stopSequences": STOP_AT_CHARLIE, "topP": 0.5}
    body = VERTEX_BODY | {"generationConfig": config}
    async with aiohttp.ClientSession(emulators.vertex_url) as http:
        answer = await (await http.post(f"{VERTEX_PATH}:generateContent", json=body)).json()
        streamed = await (await http.post(f"{VERTEX_PATH}:streamGenerateContent?alt=sse", json=body)).text()
        refused = await http.post(
            f"{VERTEX_PATH}:generateContent", json=body | {"generationConfig": {"stopSequences": "x"}}
        )
    candidate = answer["candidates"][0]
    assert (candidate["content"]["parts"], candidate["finishReason"]) == ([{"text": "alpha bravo "}], "STOP")
    assert answer["usageMetadata"]["candidatesTokenCount"] == 2
    frames = [json.loads(line.removeprefix("data: ")) for line in streamed.split("\r\n\r\n") if line]
    assert "".join(f["candidates"][0]["content"]["parts"][0]["text"] for f in frames) == "alpha bravo "
    assert emulators.vertex.requests(GEMINI_FLASH)[0]["generationConfig"] == config
    assert refused.status == 400
    async with aiohttp.ClientSession(emulators.vertex_url) as http:
        received = await (await http.get("/__emulator/requests", params={"model": GEMINI_FLASH})).json()
    assert received == emulators.vertex.requests(GEMINI_FLASH), "the control endpoint reads the same"
