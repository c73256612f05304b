"""The size limits of a manifest request, checked before any object is decoded: what an API server refuses
with 413 or 400 is refused here the same way, so that no input can make admission parse or walk for long."""

from __future__ import annotations

from typing import Any, Final

MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
"""The API server's request body limit (3 MiB); larger texts are refused before parsing."""
MAX_DEPTH: Final = 100
"""How deeply mappings and lists may nest in one document; real manifests stay under 20."""
MAX_VALUES: Final = 100_000
"""Scalars, mappings and lists in one document, counted as they are walked, so a YAML alias bomb (a few
lines that expand to billions of values) is refused after this many rather than expanded."""


class LimitExceeded(ValueError):
    """A manifest over one of the limits; the message says which and by how much."""


def check_request_size(text: str) -> None:
    """Refuse a text over MAX_REQUEST_BYTES, worded as the API server's 413."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_REQUEST_BYTES:
        raise LimitExceeded(f"Request entity too large: limit is {MAX_REQUEST_BYTES}, got {size} bytes")


def check_document_shape(document: Any, position: int) -> None:
    """Refuse a parsed document nested deeper than MAX_DEPTH or holding more than MAX_VALUES values. Shared
    sub-trees (YAML aliases) are counted each time they are reached, as decoding would reach them."""
    budget = MAX_VALUES - 1  # the document itself
    stack: list[tuple[Any, int]] = [(document, 1)] if isinstance(document, dict | list) else []
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise LimitExceeded(f"document {position + 1}: nested deeper than {MAX_DEPTH} levels")
        children = value.values() if isinstance(value, dict) else value
        budget -= len(children)  # scalars are counted here, not visited one by one
        if budget < 0:
            raise LimitExceeded(
                f"document {position + 1}: more than {MAX_VALUES} values (limit {MAX_VALUES})"
            )
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
