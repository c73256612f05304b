"""Label and field selectors as the Kubernetes API server parses and matches them.

Label selectors follow `k8s.io/apimachinery/pkg/labels` (`labels.Parse`): `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`, comma-joined, with its lexer's error messages.
Field selectors follow `k8s.io/apimachinery/pkg/fields` (`fields.ParseSelector`) and each kind's field label
conversion (which fields a list may select on, and how it refuses the others)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from libs.api.formats import label_key_errors, label_value_errors, regex_error


class SelectorError(ValueError):
    """A selector the API server refuses; the message is the API server's."""


# ---------------------------------------------------------------- label selectors

_SPECIAL: Final = frozenset("=!(),<>")
_WHITESPACE: Final = frozenset(" \t\r\n")
_KEYWORDS: Final = {")", ",", "!", "==", "=", ">", "in", "<", "!=", "notin", "("}
_BINARY_OPERATORS: Final = ("in", "notin", "=", "==", "!=", "gt", "lt")
_IDENTIFIER: Final = "identifier"
_END: Final = "end"
_ERROR: Final = "error"

_QUALIFIED_NAME_TAIL: Final = regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character",
    "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]",
    "MyName",
    "my.name",
    "123-abc",
)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement: a key, an operator (`in`, `notin`, `=`, `==`, `!=`, `exists`, `!`, `gt`, `lt`)
    and its values."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """`labels.Requirement.Matches`."""
        if self.op in ("in", "=", "=="):
            return self.key in labels and labels[self.key] in self.values
        if self.op in ("notin", "!="):
            return self.key not in labels or labels[self.key] not in self.values
        if self.op == "exists":
            return self.key in labels
        if self.op == "!":
            return self.key not in labels
        return self._compares(labels)

    def _compares(self, labels: Mapping[str, str]) -> bool:
        try:
            have, want = int(labels[self.key]), int(self.values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if self.op == "gt" else have < want


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector: every requirement must hold; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        present = labels or {}
        return all(requirement.matches(present) for requirement in self.requirements)


def _token(literal: str) -> str:
    return literal if literal in _KEYWORDS else _IDENTIFIER


def _lex(text: str) -> list[tuple[str, str]]:
    """`labels.Lexer`: (token, literal) pairs ending with the end of string."""
    items: list[tuple[str, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            items.append((_END, ""))
            return items
        if text[pos] in _SPECIAL:
            token, literal, pos = _scan_special(text, pos)
        else:
            start = pos
            while pos < len(text) and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
                pos += 1
            literal = text[start:pos]
            token = _token(literal)
        items.append((token, literal))


def _scan_special(text: str, pos: int) -> tuple[str, str, int]:
    """The longest operator at `pos` (`scanSpecialSymbol`)."""
    buffer, last = "", ""
    while pos < len(text) and text[pos] in _SPECIAL:
        buffer += text[pos]
        if buffer in _KEYWORDS:
            last = buffer
        elif last:
            break
        pos += 1
    if not last:
        return _ERROR, f"error expected: keyword found '{buffer}'", pos
    return last, last, pos


class _LabelParser:
    """`labels.Parser`: a recursive descent over the lexer's tokens, with its messages."""

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def lookahead(self, values: bool) -> tuple[str, str]:
        token, literal = self.items[self.position]
        return (_IDENTIFIER if values and token in ("in", "notin") else token), literal

    def consume(self, values: bool) -> tuple[str, str]:
        found = self.lookahead(values)
        self.position += 1
        return found

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead(values=True)
            if token == _END:
                return requirements
            if token not in (_IDENTIFIER, "!"):
                raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except SelectorError as error:
                raise SelectorError(f"unable to parse requirement: {error}") from None
            token, literal = self.consume(values=True)
            if token == _END:
                return requirements
            if token != ",":
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            following, literal = self.lookahead(values=True)
            if following not in (_IDENTIFIER, "!"):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        key, op = self.key_and_operator()
        if op in ("exists", "!"):
            return Requirement(key, op)
        op = self.operator()
        values = self.set_values() if op in ("in", "notin") else self.exact_value()
        return _new_requirement(key, op, values)

    def key_and_operator(self) -> tuple[str, str]:
        op = ""
        token, literal = self.consume(values=True)
        if token == "!":
            op = "!"
            token, literal = self.consume(values=True)
        if token != _IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        _check_key(literal, "<nil>")
        if self.lookahead(values=True)[0] in (_END, ","):
            op = op or "exists"
        return literal, op

    def operator(self) -> str:
        token, literal = self.consume(values=False)
        named = {"in": "in", "notin": "notin", "=": "=", "==": "==", "!=": "!=", ">": "gt", "<": "lt"}
        if token not in named:
            raise SelectorError(f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")
        return named[token]

    def set_values(self) -> list[str]:
        token, literal = self.consume(values=True)
        if token != "(":
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead(values=True)
        if token == ")":
            self.consume(values=True)
            return [""]
        if token not in (_IDENTIFIER, ","):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        found = self.identifiers()
        if self.consume(values=True)[0] != ")":
            raise SelectorError(f"found '{literal}', expected: ')'")
        return found

    def identifiers(self) -> list[str]:
        found: set[str] = set()
        while True:
            token, literal = self.consume(values=True)
            if token == _IDENTIFIER:
                found.add(literal)
                following, literal = self.lookahead(values=True)
                if following == ")":
                    return sorted(found)
                if following != ",":
                    raise SelectorError(f"found '{literal}', expected: ',' or ')'")
            elif token == ",":
                if not found:
                    found.add("")
                following = self.lookahead(values=True)[0]
                if following == ")":
                    found.add("")
                    return sorted(found)
                if following == ",":
                    self.consume(values=True)
                    found.add("")
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        token, _ = self.lookahead(values=True)
        if token in (_END, ","):
            return [""]
        token, literal = self.consume(values=True)
        if token == _IDENTIFIER:
            return [literal]
        raise SelectorError(f"found '{literal}', expected: identifier")


def _check_key(key: str, path: str) -> None:
    """`validateLabelKey`: `IsQualifiedName`, as a field error on `path`."""
    if len(key.split("/")) > 2:
        problems = [
            "a qualified name "
            + _QUALIFIED_NAME_TAIL
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    else:
        problems = label_key_errors(key)
    if problems:
        raise SelectorError(f'{path}: Invalid value: "{key}": {"; ".join(problems)}')


def _new_requirement(key: str, op: str, values: list[str]) -> Requirement:
    """`labels.NewRequirement`'s checks of the values (the key was checked while parsing)."""
    problems: list[str] = []
    if op in ("gt", "lt"):
        for index, value in enumerate(values):
            if not _is_int(value):
                problems.append(
                    f'values[{index}]: Invalid value: "{value}": '
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    for index, value in enumerate(values):
        value_problems = label_value_errors(value)
        if value_problems:
            problems.append(f'values[{index}][{key}]: Invalid value: "{value}": {"; ".join(value_problems)}')
    if problems:
        raise SelectorError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
    return Requirement(key, op, tuple(values))


def _is_int(value: str) -> bool:
    try:
        int(value, 10)
    except ValueError:
        return False
    return value.strip() == value and "_" not in value


def parse_label_selector(text: str) -> LabelSelector:
    """A label selector, or SelectorError in `labels.Parse`'s words. Requirements are sorted by key, as
    upstream sorts them."""
    requirements = _LabelParser(text).parse()
    return LabelSelector(tuple(sorted(requirements, key=lambda requirement: requirement.key)))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


# ---------------------------------------------------------------- field selectors


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """`field=value` (or `!=` when `negated`)."""

    field: str
    value: str
    negated: bool = False

    def matches(self, fields: Mapping[str, str]) -> bool:
        have = fields.get(self.field)
        return (have != self.value) if self.negated else (have == self.value)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed field selector: every term must hold."""

    terms: tuple[FieldTerm, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(term.matches(fields) for term in self.terms)


_OPERATORS: Final = ("!=", "==", "=")


def _split_terms(text: str) -> list[str]:
    """The comma-separated terms; a backslash-escaped comma stays inside its term (`splitTerms`)."""
    if not text:
        return []
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """lhs, operator, rhs at the first operator (`splitTerm`)."""
    for index in range(len(term)):
        for op in _OPERATORS:
            if term.startswith(op, index):
                return term[:index], op, term[index + len(op) :]
    return None


def _unescape(value: str) -> str:
    """`fields.UnescapeValue`: `\\\\`, `\\,` and `\\=` escapes; a bare `,` or `=` is refused."""
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            # Go formats the offending rune with %v: its code point.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """A field selector's terms (sorted, as upstream sorts them), or SelectorError in its words."""
    terms = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        terms.append(FieldTerm(lhs, _unescape(rhs), negated=op == "!="))
    return FieldSelector(tuple(terms))


_META: Final = ("metadata.name", "metadata.namespace")
_INVOLVED: Final = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
_EVENT_FIELDS: Final = (
    *(f"involvedObject.{name}" for name in _INVOLVED),
    "reason",
    "reportingComponent",
    "source",
    "type",
    *_META,
)

SELECTABLE_FIELDS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("", "Pod"): (
        *_META,
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    ),
    ("", "Node"): ("metadata.name", "spec.unschedulable"),
    ("", "Namespace"): ("status.phase", "metadata.name"),
    ("", "Event"): _EVENT_FIELDS,
    # Its own spellings, each read as the core one (events.k8s.io/v1 conversion.go); not the core ones.
    ("events.k8s.io", "Event"): (
        *(f"regarding.{name}" for name in _INVOLVED),
        "reason",
        "reportingController",
        "source",
        "type",
        *_META,
    ),
    ("batch", "Job"): (*_META, "status.successful"),
    ("resource.k8s.io", "ResourceSlice"): ("metadata.name", "spec.nodeName", "spec.driver"),
}
"""Per (group, kind), the fields a field selector may name (each kind's `AddFieldLabelConversionFunc`);
any other kind takes `metadata.name` and `metadata.namespace` only."""

_ALIASES: Final = {
    ("", "Pod", "spec.host"): "spec.nodeName",
    **{("events.k8s.io", "Event", f"regarding.{name}"): f"involvedObject.{name}" for name in _INVOLVED},
    ("events.k8s.io", "Event", "reportingController"): "reportingComponent",
}


def _refusal(group: str, version: str, kind: str, label: str) -> str:
    """The conversion function's message for a field it does not support."""
    if (group, kind) == ("batch", "Job"):
        return f'field label "{label}" not supported for Job'
    if (group, kind) == ("resource.k8s.io", "ResourceSlice"):
        return f"field label not supported for {group}/{version}, Kind={kind}: {label}"
    if (group, kind) in SELECTABLE_FIELDS:
        return f"field label not supported: {label}"
    return f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'


def check_fields(selector: FieldSelector, group: str, version: str, kind: str) -> FieldSelector:
    """The selector with each field converted for the kind (`spec.host` is `spec.nodeName`), or
    SelectorError (a 400 BadRequest) for a field the kind cannot be selected on."""
    supported = SELECTABLE_FIELDS.get((group, kind), _META)
    converted = []
    for term in selector.terms:
        if term.field not in supported and (group, kind, term.field) not in _ALIASES:
            raise SelectorError(_refusal(group, version, kind, term.field))
        field = _ALIASES.get((group, kind, term.field), term.field)
        converted.append(FieldTerm(field, term.value, term.negated))
    return FieldSelector(tuple(converted))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _at(obj: Mapping[str, Any], path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _pod_fields(pod: Mapping[str, Any]) -> dict[str, str]:
    ips = _at(pod, "status.podIPs") or []
    fields = {
        path: _text(_at(pod, path))
        for path in (
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        )
    }
    fields["spec.hostNetwork"] = _text(bool(_at(pod, "spec.hostNetwork")))
    # `status.podIPs` selects on the first IP only (`PodToSelectableFields`).
    fields["status.podIPs"] = _text(ips[0].get("ip")) if ips and isinstance(ips[0], Mapping) else ""
    return fields


def _event_fields(event: Mapping[str, Any]) -> dict[str, str]:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    fields = {f"involvedObject.{name}": _text(involved.get(name)) for name in _INVOLVED}
    source = event.get("source") or event.get("deprecatedSource") or {}
    fields["reason"] = _text(event.get("reason"))
    fields["reportingComponent"] = _text(event.get("reportingComponent") or event.get("reportingController"))
    fields["source"] = _text(source.get("component"))
    fields["type"] = _text(event.get("type"))
    return fields


def selectable_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    """The field set a field selector is matched against (each kind's `SelectableFields`)."""
    metadata = obj.get("metadata") or {}
    fields = {
        "metadata.name": _text(metadata.get("name")),
        "metadata.namespace": _text(metadata.get("namespace")),
    }
    kind = obj.get("kind")
    if kind == "Pod":
        fields.update(_pod_fields(obj))
    elif kind == "Node":
        fields["spec.unschedulable"] = _text(bool(_at(obj, "spec.unschedulable")))
    elif kind == "Namespace":
        fields["status.phase"] = _text(_at(obj, "status.phase"))
    elif kind == "Event":
        fields.update(_event_fields(obj))
    elif kind == "Job":
        fields["status.successful"] = str(int(_at(obj, "status.succeeded") or 0))
    elif kind == "ResourceSlice":
        fields["spec.nodeName"] = _text(_at(obj, "spec.nodeName"))
        fields["spec.driver"] = _text(_at(obj, "spec.driver"))
    return fields


def select(
    items: Sequence[Mapping[str, Any]],
    labels: LabelSelector | None = None,
    fields: FieldSelector | None = None,
) -> list[Mapping[str, Any]]:
    """The objects both selectors match."""
    return [
        obj
        for obj in items
        if (labels is None or labels.matches(labels_of(obj)))
        and (fields is None or fields.matches(selectable_fields(obj)))
    ]
