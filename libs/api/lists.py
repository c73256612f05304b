"""Lists in pages, as the API server serves them with `limit` and `continue`: the token names where the
page before ended (its last item's namespace and name), so a page is read from there with an index probe
and items created or deleted between pages are neither repeated nor skipped before that point."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

DEFAULT_CHUNK_SIZE = 200
"""Items per page the CLI asks for (kubectl's --chunk-size is 500; a page here is one message on a bus that
carries 1 MiB, and a pod with its status and conditions takes 1-3 KiB)."""


class InvalidContinue(ValueError):
    """A continue token that this server did not make."""


def continue_token(namespace: str, name: str) -> str:
    """The token of a page whose last item is namespace/name."""
    return base64.urlsafe_b64encode(json.dumps([namespace, name]).encode()).decode()


def continue_after(token: str) -> tuple[str, str]:
    """The (namespace, name) a token says its page ended at."""
    try:
        key = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidContinue(f"continue key is not valid: {exc}") from None
    if not (isinstance(key, list) and len(key) == 2 and all(isinstance(part, str) for part in key)):
        raise InvalidContinue("continue key is not valid: not a namespace and name")
    return key[0], key[1]


Page = tuple[list[dict[str, Any]], str | None]


def read_pages(
    ask: Callable[[dict[str, Any]], Page], request: dict[str, Any], chunk_size: int
) -> list[dict[str, Any]]:
    """Every item of a list, asked for page by page with `ask` (a request's fields to the items and the next
    page's token); a page the bus cannot carry is asked for again in halves (RPC error AnswerTooLarge)."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    limit = chunk_size or None
    while True:
        try:
            page, token = ask({**request, "limit": limit, "continue_token": token})
        except Exception as exc:
            if getattr(exc, "error_type", None) != "AnswerTooLarge" or limit == 1:
                raise
            limit = max(1, (limit or 2 * DEFAULT_CHUNK_SIZE) // 2)
            continue
        items += page
        if token is None:
            return items
