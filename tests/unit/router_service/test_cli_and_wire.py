"""The router's verbs parse as documented, and every way a request can stop maps to one refusal."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from libs.client.cli import build_parser
from libs.events.inference import InferenceCall
from libs.router import BudgetExceeded, UnknownFeature
from services.llm_router.overload import Overloaded
from services.llm_router.wire import refusal


def test_infer_takes_a_feature_a_prompt_and_output_options():
    args = build_parser().parse_args(
        ["infer", "--feature", "search-answer", "hello", "--stream", "--max-tokens", "32", "-o", "json"]
    )
    assert (args.feature, args.prompt, args.stream, args.max_tokens, args.output) == (
        "search-answer",
        "hello",
        True,
        32,
        "json",
    )


def test_router_scoreboard_and_emulators_up_parse():
    parser = build_parser()
    assert parser.parse_args(["router", "scoreboard", "-o", "json"]).output == "json"
    up = parser.parse_args(["emulators", "up", "--bedrock-port", "4001", "--vertex-port", "4002"])
    assert (up.bedrock_port, up.vertex_port) == (4001, 4002)


@pytest.mark.parametrize(
    ("error", "reason", "status", "retry_after"),
    [
        (Overloaded("full"), "overloaded", 503, 1.0),
        (BudgetExceeded("over", 2.5), "budget_exceeded", 429, 2.5),
        (UnknownFeature("nope"), "unknown_feature", 404, None),
        (RuntimeError("bug"), "internal_error", 500, None),
    ],
)
def test_a_stopped_request_becomes_one_refusal(error, reason, status, retry_after):
    frame = refusal(error, "req-1")
    assert (frame.reason, frame.http_status, frame.retry_after_s) == (reason, status, retry_after)


def test_a_malformed_call_is_a_bad_request():
    with pytest.raises(ValidationError) as caught:
        InferenceCall.model_validate({"feature": "f", "messages": []})
    assert (refusal(caught.value, None).reason, refusal(caught.value, None).http_status) == (
        "bad_request",
        400,
    )
