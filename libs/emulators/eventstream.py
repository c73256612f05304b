"""The `application/vnd.amazon.eventstream` framing Bedrock's ConverseStream uses.

A message is `[total_len u32][headers_len u32][prelude_crc u32][headers][payload][message_crc u32]`, big-endian,
CRC32 over the prelude and then over everything before the final CRC. Header values here are all strings
(type 7: `[name_len u8][name][7][value_len u16][value]`).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

_STRING = 7


def encode_headers(headers: dict[str, str]) -> bytes:
    """Serialise string headers."""
    out = bytearray()
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        out += struct.pack(">B", len(raw_name)) + raw_name
        out += struct.pack(">BH", _STRING, len(raw_value)) + raw_value
    return bytes(out)


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One framed message with both CRCs."""
    raw_headers = encode_headers(headers)
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(event_type: str, payload: dict[str, Any]) -> bytes:
    """A `:message-type: event` frame, e.g. `contentBlockDelta`."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, json.dumps(payload).encode())


def exception(exception_type: str, message: str) -> bytes:
    """An in-stream error frame, e.g. `throttlingException`; the SDK raises it from the stream iterator."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, json.dumps({"message": message}).encode())
