"""How Podway subscribers decode message bodies."""

from __future__ import annotations

from typing import Any

from faststream.message import StreamMessage


async def raw_body(message: StreamMessage[Any]) -> Any:
    """A faststream decoder that keeps the body as bytes.

    faststream would json-decode by content-type, and a malformed body would fail inside faststream, before a
    Podway handler could dead-letter it or answer with an error.
    """
    return message.body
