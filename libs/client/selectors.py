"""Label selectors as kubectl's `-l` takes them: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`,
`!k`, joined by commas (all must hold)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_SET = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)\s*$")
_EQUALITY = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=,()]+)\s*$")


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # in, notin, exists, !exists
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op == "in":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values


def _terms(text: str) -> list[str]:
    """Split on the commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [*terms, current]


def parse_selector(text: str) -> list[Requirement]:
    """Requirements of a selector; a malformed one raises ValueError in kubectl's words."""
    requirements = []
    for term in _terms(text):
        if match := _SET.match(term):
            values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
            requirements.append(Requirement(match["key"], match["op"], values))
        elif match := _EQUALITY.match(term):
            op = "notin" if match["op"] == "!=" else "in"
            requirements.append(Requirement(match["key"], op, frozenset([match["value"]])))
        elif match := _EXISTS.match(term):
            requirements.append(Requirement(match["key"], "!exists" if match["neg"] else "exists"))
        else:
            raise ValueError(f'error: unable to parse requirement: "{term.strip()}"')
    return requirements


def select(items: Sequence[dict[str, Any]], requirements: Sequence[Requirement]) -> list[dict[str, Any]]:
    """The objects whose labels satisfy every requirement."""
    return [
        obj
        for obj in items
        if all(r.matches((obj.get("metadata") or {}).get("labels") or {}) for r in requirements)
    ]
