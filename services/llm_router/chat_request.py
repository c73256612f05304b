"""The body of `POST /v1/chat/completions`, checked with OpenAI's types and ranges and turned into the router's
request. A value OpenAI would refuse is refused here too, with 400 naming the parameter in OpenAI's words,
before any provider is called.

Every parameter is honoured or refused, never silently dropped (as LiteLLM does without `drop_params`): what
both clouds take is passed on (`max_tokens`, `temperature`, `top_p`, `stop`: Converse's `inferenceConfig`,
generateContent's `generationConfig`), since a request may fail over from one cloud to the other; what the
router does not pass on is accepted only at the value the answer has anyway (`n: 1`, `logprobs: false`, ...).
Parameters that only describe the caller (`user`, `metadata`, ...) change nothing in the answer and are accepted.
"""

from __future__ import annotations

from typing import Any, NoReturn

import orjson

from libs.providers import Message
from libs.router import InferRequest

DEFAULT_MAX_TOKENS = 256
MAX_STOP_SEQUENCES = 4
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
STREAM_OPTIONS = frozenset({"include_usage"})
PASSED_ON = frozenset(
    {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "stream"}
)
ABOUT_THE_CALLER = frozenset({"user", "metadata", "store", "safety_identifier", "prompt_cache_key"})
ACCEPTED = PASSED_ON | ABOUT_THE_CALLER | {"stream_options"}
_NO_TOOLS = "it does not pass tools to the providers"
_NO_LOGPROBS = "it returns no log probabilities"
_TEXT_ONLY = "it answers in text"
# What the router does not pass on: the values it accepts (the answer has them anyway; none = only absent or
# null) and why.
NOT_PASSED_ON: dict[str, tuple[tuple[Any, ...], str]] = {
    "n": ((1,), "it answers with one choice"),
    "logprobs": ((False,), _NO_LOGPROBS),
    "top_logprobs": ((), _NO_LOGPROBS),
    "response_format": (({"type": "text"},), _TEXT_ONLY),
    "modalities": ((["text"],), _TEXT_ONLY),
    "audio": ((), _TEXT_ONLY),
    "tools": ((), _NO_TOOLS),
    "tool_choice": (("none",), _NO_TOOLS),
    "parallel_tool_calls": ((), _NO_TOOLS),
    "functions": ((), _NO_TOOLS),
    "function_call": ((), _NO_TOOLS),
    "presence_penalty": ((0,), "Bedrock's Converse takes no penalties"),
    "frequency_penalty": ((0,), "Bedrock's Converse takes no penalties"),
    "logit_bias": (({},), "neither cloud takes token biases"),
    "seed": ((), "Bedrock's Converse takes no seed"),
    "prediction": ((), "neither cloud takes predicted outputs"),
    "reasoning_effort": ((), "it does not pass reasoning settings to the providers"),
    "verbosity": ((), "it does not pass verbosity to the providers"),
    "web_search_options": ((), "it does not search the web"),
    "service_tier": (("auto", "default"), "the router picks the capacity: provisioned, then on-demand"),
}


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
    unexpected = body.keys() - ACCEPTED
    if unexpected:
        _refuse_what_is_not_passed_on(body, unexpected)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        _refuse_messages(raw)
    messages = tuple([_message(index, item) for index, item in enumerate(raw)])
    max_tokens = _integer(body, "max_completion_tokens", minimum=1)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", minimum=1)
    else:
        _integer(body, "max_tokens", minimum=1)
    temperature = _number(body, "temperature", 0, 2)
    top_p = _number(body, "top_p", 0, 1)
    stream = _boolean(body, "stream", "stream") or False
    return (
        InferRequest(
            feature=feature,
            messages=messages,
            max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
            stream=stream,
            request_id=request_id,
            temperature=temperature,
            top_p=top_p,
            stop=_stop(body.get("stop")),
            api_key=api_key,
        ),
        _include_usage(body.get("stream_options"), stream),
    )


def _refuse_what_is_not_passed_on(body: dict[str, Any], names: set[str]) -> None:
    for name in sorted(names):
        if name not in NOT_PASSED_ON:
            raise _unknown(name)
        _not_passed_on(name, body[name])


def _not_passed_on(param: str, value: Any) -> None:
    """Refuse `value` unless it is absent or what the router gives anyway."""
    if value is None:
        return
    accepted, why = NOT_PASSED_ON[param]
    if any(_same_json(value, given) for given in accepted):
        return
    if not accepted:
        raise InvalidParameter(
            f"Unsupported parameter: '{param}' is not supported on this router; {why}.",
            param,
            "unsupported_parameter",
        )
    raise InvalidParameter(
        f"Unsupported value: '{param}' does not support {_json(value)} on this router; {why} "
        f"({' or '.join(_json(given) for given in accepted)}).",
        param,
        "unsupported_value",
    )


def _refuse_messages(raw: Any) -> NoReturn:
    if raw is None:
        raise InvalidParameter(
            "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
        )
    if not isinstance(raw, list):
        raise _wrong_type("messages", "an array", raw)
    raise InvalidParameter(
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array "
        "instead.",
        "messages",
        "empty_array",
    )


def _message(index: int, item: Any) -> Message:
    given = item.get("role") if type(item) is dict else None
    role = ROLES.get(given) if type(given) is str else None
    if role is None or "tool_calls" in item or "function_call" in item:
        _refuse_message(index, item)
        assert role is not None  # it refused any other
    content = item.get("content")
    if type(content) is not str:
        where = f"messages[{index}].content"
        if not isinstance(content, list):
            raise _wrong_type(where, "a string or an array of content parts", content)
        content = "".join([_text_part(f"{where}[{at}]", part) for at, part in enumerate(content)])
    return Message(role, content)  # type: ignore[arg-type]


def _refuse_message(index: int, item: Any) -> None:
    """Refuse what is wrong with a message that is not a plain system, user or assistant one, if anything."""
    where = f"messages[{index}]"
    if not isinstance(item, dict):
        raise _wrong_type(where, "an object", item)
    role = item.get("role")
    if role in ("tool", "function"):
        raise InvalidParameter(
            f"Unsupported value: '{where}.role' does not support {_json(role)} on this router; {_NO_TOOLS}.",
            f"{where}.role",
            "unsupported_value",
        )
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidParameter(
            f"Invalid value: {_json(role)}. Supported values are: 'system', 'developer', 'user' and 'assistant'.",
            f"{where}.role",
            "invalid_value",
        )
    for calls in ("tool_calls", "function_call"):
        if item.get(calls):  # null or empty is no call
            raise InvalidParameter(
                f"Unsupported parameter: '{where}.{calls}' is not supported on this router; {_NO_TOOLS}.",
                f"{where}.{calls}",
                "unsupported_parameter",
            )


def _text_part(where: str, part: Any) -> str:
    """The text of a content part; an image, audio or file part is refused, not dropped."""
    if not isinstance(part, dict):
        raise _wrong_type(where, "an object", part)
    kind = part.get("type")
    if kind != "text":
        raise InvalidParameter(
            f"Unsupported value: '{where}.type' does not support {_json(kind)} on this router; only 'text' "
            "parts are passed to the providers.",
            f"{where}.type",
            "unsupported_value",
        )
    text = part.get("text")
    if not isinstance(text, str):
        raise _wrong_type(f"{where}.text", "a string", text)
    return text


def _stop(value: Any) -> tuple[str, ...]:
    """Up to 4 non-empty sequences, as OpenAI takes them (Converse and generateContent take as many)."""
    if value is None:
        return ()
    if isinstance(value, str):
        sequences, indexed = [value], False
    elif isinstance(value, list):
        sequences, indexed = value, True
    else:
        raise _wrong_type("stop", "a string or an array of strings", value)
    if len(sequences) > MAX_STOP_SEQUENCES:
        raise InvalidParameter(
            f"Invalid 'stop': array too long. Expected an array with maximum length {MAX_STOP_SEQUENCES}, "
            f"but got an array with length {len(sequences)} instead.",
            "stop",
            "array_above_max_length",
        )
    for at, sequence in enumerate(sequences):
        param = f"stop[{at}]" if indexed else "stop"
        if not isinstance(sequence, str):
            raise _wrong_type(param, "a string", sequence)
        if not sequence:
            raise InvalidParameter(
                f"Invalid '{param}': string too short. Expected a string with minimum length 1, "
                "but got an empty string instead.",
                param,
                "string_below_min_length",
            )
    return tuple(sequences)


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


def _same_json(value: Any, given: Any) -> bool:
    """Equal as JSON values: 0 and 0.0 are, true and 1 are not."""
    if type(value) in _NUMBERS and type(given) in _NUMBERS:
        return bool(value == given)
    return type(value) is type(given) and bool(value == given)


_NUMBERS = (int, float)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


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
