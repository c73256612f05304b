"""Label selectors as kubectl's `-l` takes them: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
`!k`, joined by commas (all must hold). The parser is the API server's (`libs.kubeapi.selectors`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from libs.kubeapi.selectors import Requirement, SelectorError, labels_of, parse_label_selector

__all__ = ["Requirement", "parse_selector", "select"]


def parse_selector(text: str) -> list[Requirement]:
    """Requirements of a selector; a malformed one raises ValueError in the API server's words."""
    try:
        return list(parse_label_selector(text).requirements)
    except SelectorError as error:
        raise ValueError(f"error: {error}") from None


def select(items: Sequence[dict[str, Any]], requirements: Sequence[Requirement]) -> list[dict[str, Any]]:
    """The objects whose labels satisfy every requirement."""
    return [obj for obj in items if all(r.matches(labels_of(obj)) for r in requirements)]
