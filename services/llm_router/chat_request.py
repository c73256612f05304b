"""The body of `POST /v1/chat/completions`, checked with OpenAI's types and ranges and turned into the router's
request. A value OpenAI would refuse is refused here too, with 400 naming the parameter in OpenAI's words,
before any provider is called."""

from __future__ import annotations

from typing import Any

from libs.providers import Message
from libs.router import InferRequest

DEFAULT_MAX_TOKENS = 256
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
STREAM_OPTIONS = frozenset({"include_usage"})


class InvalidParameter(ValueError):
    """A parameter the front refuses: OpenAI's error `message`, `param` and `code`."""

    def __init__(self, message: str, param: str | None, code: str) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def chat_request(
    body: dict[str, Any], feature: str, api_key: str, request_id: str
) -> tuple[InferRequest, bool]:
    """The router's request for a chat completion body, and whether a stream ends with a usage chunk."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise InvalidParameter("messages: must be a non-empty list", "messages", "invalid_request")
    messages = tuple(_message(index, item) for index, item in enumerate(raw))
    max_tokens = _integer(body, "max_completion_tokens", minimum=1)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", minimum=1)
    else:
        _integer(body, "max_tokens", minimum=1)
    temperature = _number(body, "temperature", 0, 2)
    _number(body, "top_p", 0, 1)
    stream = _boolean(body, "stream", "stream") or False
    return (
        InferRequest(
            feature=feature,
            messages=messages,
            max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
            stream=stream,
            request_id=request_id,
            temperature=temperature,
            api_key=api_key,
        ),
        _include_usage(body.get("stream_options"), stream),
    )


def _message(index: int, item: Any) -> Message:
    if not isinstance(item, dict) or item.get("role") not in ROLES:
        raise InvalidParameter(
            f"messages[{index}].role: must be one of {', '.join(sorted(ROLES))}",
            f"messages[{index}].role",
            "invalid_request",
        )
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    if not isinstance(content, str):
        raise InvalidParameter(
            f"messages[{index}].content: must be a string or a list of text parts",
            f"messages[{index}].content",
            "invalid_request",
        )
    return Message(ROLES[item["role"]], content)  # type: ignore[arg-type]


def _integer(body: dict[str, Any], name: str, *, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if type(value) is not int:  # a JSON true is a bool, which Python counts as an int
        raise _wrong_type(name, "an integer", value)
    if value < minimum:
        raise InvalidParameter(
            f"Invalid '{name}': integer below minimum value. Expected a value >= {minimum}, "
            f"but got {value} instead.",
            name,
            "integer_below_min_value",
        )
    return value


def _number(body: dict[str, Any], name: str, minimum: float, maximum: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if type(value) not in (int, float):
        raise _wrong_type(name, "a decimal", value)
    if value < minimum:
        raise InvalidParameter(
            f"Invalid '{name}': decimal below minimum value. Expected a value >= {minimum}, "
            f"but got {value} instead.",
            name,
            "decimal_below_min_value",
        )
    if value > maximum:
        raise InvalidParameter(
            f"Invalid '{name}': decimal above maximum value. Expected a value <= {maximum}, "
            f"but got {value} instead.",
            name,
            "decimal_above_max_value",
        )
    return float(value)


def _boolean(container: dict[str, Any], key: str, param: str) -> bool | None:
    value = container.get(key)
    if value is not None and type(value) is not bool:
        raise _wrong_type(param, "a boolean", value)
    return value


def _include_usage(options: Any, stream: bool) -> bool:
    """`stream_options` is an object of booleans, and only for a stream (as OpenAI has it)."""
    if options is None:
        return False
    if not stream:
        raise InvalidParameter(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
            "invalid_value",
        )
    if not isinstance(options, dict):
        raise _wrong_type("stream_options", "an object", options)
    for key in options.keys() - STREAM_OPTIONS:
        raise _unknown(f"stream_options.{key}")
    return _boolean(options, "include_usage", "stream_options.include_usage") or False


def _wrong_type(param: str, expected: str, value: Any) -> InvalidParameter:
    return InvalidParameter(
        f"Invalid type for '{param}': expected {expected}, but got {_json_type(value)} instead.",
        param,
        "invalid_type",
    )


def _unknown(param: str) -> InvalidParameter:
    return InvalidParameter(f"Unknown parameter: '{param}'.", param, "unknown_parameter")


def _json_type(value: Any) -> str:
    """What a JSON value is, in OpenAI's words."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
