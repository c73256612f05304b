"""Answers: a `Status` for every refusal, JSON for everything else."""

from __future__ import annotations

import json
from typing import Any

import orjson
from aiohttp import web

from libs.kubeapi.security import User

USER = web.RequestKey("user", User)
"""Who sent the request, once authenticated."""


class Refused(Exception):
    """A request answered with a `Status`."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(answer.get("message"))
        self.answer = answer


def answer(body: dict[str, Any], code: int = 200, *, content_type: str = "application/json") -> web.Response:
    try:
        encoded = orjson.dumps(body)
    except orjson.JSONEncodeError:  # a lone surrogate a client sent, quoted back in a refusal
        encoded = json.dumps(body).encode()
    return web.Response(body=encoded, status=code, headers={"Content-Type": content_type})


def refusal(answer_: dict[str, Any]) -> web.Response:
    return answer(answer_, int(answer_.get("code") or 500))


def warning_header(text: str) -> str:
    """A `Warning` header value as upstream's NewWarningHeader writes it: code 299, no agent, the text quoted
    with its quotes and backslashes escaped (kubectl reads nothing from a header quoted otherwise); a control
    character, which a header cannot carry, becomes a space."""
    printable = "".join(" " if ord(char) < 32 or ord(char) == 127 else char for char in text)
    return '299 - "' + printable.replace("\\", "\\\\").replace('"', '\\"') + '"'
