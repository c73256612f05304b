"""CEL device selectors (DeviceClass and request `selectors[].cel.expression`): compiled once per
expression, bounded in size and macro nesting at admission, and evaluated against a device.

A device is seen by CEL as `device.driver`, `device.attributes["<domain>"].<name>`,
`device.capacity["<domain>"].<name>` (a number: quantities are converted) and
`device.allowMultipleAllocations`. The Kubernetes quantity library (`quantity("40Gi")`, `compareTo`,
`isGreaterThan`, ...) works on those numbers."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

from libs.api.cel_engine import cel
from libs.api.errors import FieldError, FieldPath, forbidden, invalid, required, too_long
from libs.api.models.resource import Device
from libs.api.quantity import QuantityError, cel_number, parse_quantity

MAX_EXPRESSION_LENGTH: Final = 10 * 1024
MAX_MACRO_NESTING: Final = 2
COMPREHENSION_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
DEVICE_VARIABLE: Final = "device"
_ERROR_LINE_RE: Final = re.compile(r"ERROR: <input>:\d+:\d+: [^\n]*")


class SelectorError(ValueError):
    """A selector that cannot be used."""


class SelectorCompileError(SelectorError):
    """Rejected at admission: too long, macros nested too deep, or not valid CEL."""

    def __init__(self, reason: Literal["too_long", "too_complex", "invalid"], detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class SelectorRuntimeError(SelectorError):
    """Evaluation failed for a device (e.g. a missing attribute); Kubernetes fails the allocation then."""


# Compiled programs by expression: a selector is compiled once per process, however many devices it meets.
_PROGRAMS: dict[str, cel.Program] = {}


def compile_selector(expression: str) -> cel.Program:
    """The compiled program of a selector, from the cache when it was compiled before.

    Raises SelectorCompileError when the expression is longer than 10 Ki characters, nests comprehension
    macros more than two deep, or does not compile."""
    program = _PROGRAMS.get(expression)
    if program is None:
        program = _compile(expression)
        _PROGRAMS[expression] = program
    return program


def _compile(expression: str) -> cel.Program:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorCompileError("too_long", f"longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        program = cel.compile(expression)
    except ValueError as error:
        raise SelectorCompileError("invalid", _compile_message(str(error))) from error
    tokens = tokenize(expression)
    depth = _macro_nesting_depth(tokens)
    if depth > MAX_MACRO_NESTING:
        raise SelectorCompileError(
            "too_complex",
            f"too complex: comprehension macros (all, exists, exists_one, map, filter) nested {depth} deep, "
            f"at most {MAX_MACRO_NESTING} allowed",
        )
    _check_declared(expression, program, tokens)
    return program


def _compile_message(message: str) -> str:
    # The library prefixes "Failed to parse expression '<expr>': " and adds source excerpts with carets;
    # keep only the `ERROR: <input>:line:col: ...` lines, one error line per field error.
    errors = _ERROR_LINE_RE.findall(message)
    return "; ".join(errors) if errors else message


def _check_declared(expression: str, program: cel.Program, tokens: list[Token]) -> None:
    bound = _macro_bound_names(tokens)
    for name in program.variables():
        if name == DEVICE_VARIABLE or name in bound:
            continue
        offset = next((t.offset for t in tokens if t.kind == "ident" and t.text == name), 0)
        line = expression.count("\n", 0, offset) + 1
        column = offset - (expression.rfind("\n", 0, offset) + 1) + 1
        raise SelectorCompileError(
            "invalid", f"ERROR: <input>:{line}:{column}: undeclared reference to '{name}' (in container '')"
        )


def selector_errors(expression: str | None, path: FieldPath) -> list[FieldError]:
    """Admission errors of one selector expression at `path` (`...selectors[i].cel.expression`)."""
    if not expression:
        return [required(path)]
    try:
        compile_selector(expression)
    except SelectorCompileError as error:
        if error.reason == "too_long":
            return [too_long(path, MAX_EXPRESSION_LENGTH)]
        if error.reason == "too_complex":
            return [forbidden(path, error.detail)]
        return [invalid(path, expression, f"compilation failed: {error.detail}")]
    return []


@dataclass(frozen=True, slots=True)
class Token:
    """A lexical token of a CEL expression: identifier, literal or punctuation, with its offset."""

    kind: Literal["ident", "literal", "punct"]
    text: str
    offset: int


_TOKEN_RE: Final = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''
        |"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<quoted>`[^`]*`)
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(expression: str) -> list[Token]:
    """The tokens of an expression, comments and whitespace dropped (enough for static checks)."""
    tokens: list[Token] = []
    for match in _TOKEN_RE.finditer(expression):
        group = match.lastgroup
        if group == "space":
            continue
        kind: Literal["ident", "literal", "punct"] = (
            "ident" if group == "ident" else "punct" if group == "punct" else "literal"
        )
        tokens.append(Token(kind, match.group(), match.start()))
    return tokens


def macro_nesting_depth(expression: str) -> int:
    """How deep comprehension macros nest: `l.all(x, x > 0)` is 1, `l.all(x, m.exists(y, y == x))` is 2."""
    return _macro_nesting_depth(tokenize(expression))


def _macro_nesting_depth(tokens: list[Token]) -> int:
    # A stack of open brackets, each marked True when it opens the argument list of `.macro(`.
    open_brackets: list[bool] = []
    deepest = 0
    for position, token in enumerate(tokens):
        if token.text in "([{" and token.kind == "punct":
            opens_macro = token.text == "(" and _is_macro_call(tokens, position)
            open_brackets.append(opens_macro)
            deepest = max(deepest, sum(open_brackets))
        elif token.text in ")]}" and token.kind == "punct" and open_brackets:
            open_brackets.pop()
    return deepest


def _is_macro_call(tokens: list[Token], paren_position: int) -> bool:
    if paren_position < 2:
        return False
    name, dot = tokens[paren_position - 1], tokens[paren_position - 2]
    return name.kind == "ident" and name.text in COMPREHENSION_MACROS and dot.text == "."


def _macro_bound_names(tokens: list[Token]) -> set[str]:
    return {
        tokens[position + 1].text
        for position, token in enumerate(tokens[:-1])
        if token.text == "(" and _is_macro_call(tokens, position) and tokens[position + 1].kind == "ident"
    }


def device_for_cel(driver: str, device: Device) -> dict[str, Any]:
    """The `device` variable for a ResourceSlice device: attributes and capacity grouped by domain.

    Unqualified names belong to the driver's domain, as in Kubernetes; capacity quantities become numbers."""
    attributes: dict[str, dict[str, Any]] = {driver: {}}
    for qualified_name, attribute in device.attributes.items():
        domain, name = _split_qualified(qualified_name, driver)
        attributes.setdefault(domain, {})[name] = attribute.value
    capacity: dict[str, dict[str, Any]] = {driver: {}}
    for qualified_name, amount in device.capacity.items():
        domain, name = _split_qualified(qualified_name, driver)
        if amount.value is not None:
            capacity.setdefault(domain, {})[name] = cel_number(amount.value)
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": bool(device.allow_multiple_allocations),
    }


def _split_qualified(qualified_name: str, driver: str) -> tuple[str, str]:
    domain, _, name = qualified_name.rpartition("/")
    return (domain or driver), name


def _to_number(value: Any) -> Decimal:
    return parse_quantity(value) if isinstance(value, str) else Decimal(str(value))


def _compare(left: Any, right: Any) -> int:
    a, b = _to_number(left), _to_number(right)
    return (a > b) - (a < b)


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _as_integer(value: Any) -> int:
    number = _to_number(value)
    if number != number.to_integral_value():
        raise ValueError("cannot convert value to integer: it has a fractional part")
    return int(number)


QUANTITY_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "quantity": lambda text: cel_number(text),
    "isQuantity": _is_quantity,
    "compareTo": _compare,
    "isGreaterThan": lambda left, right: _compare(left, right) > 0,
    "isLessThan": lambda left, right: _compare(left, right) < 0,
    "asInteger": _as_integer,
    "isInteger": lambda value: _to_number(value) == _to_number(value).to_integral_value(),
    "asApproximateFloat": lambda value: float(_to_number(value)),
    "sign": lambda value: _compare(value, 0),
    "add": lambda left, right: cel_number(str(_to_number(left) + _to_number(right))),
    "sub": lambda left, right: cel_number(str(_to_number(left) - _to_number(right))),
}


def selector_context(device: Mapping[str, Any]) -> cel.Context:
    """A prepared evaluation context for one device; reuse it for every selector evaluated on the device
    (building one costs far more than an evaluation)."""
    return cel.Context(variables={DEVICE_VARIABLE: dict(device)}, functions=QUANTITY_FUNCTIONS)


def evaluate_selector(program: cel.Program, device: Mapping[str, Any] | cel.Context) -> bool:
    """Whether the device passes the selector. `device` is a dict shaped like device_for_cel's result
    or a context from selector_context. Raises SelectorRuntimeError when evaluation fails or the result
    is not a bool."""
    context = device if isinstance(device, cel.Context) else selector_context(device)
    try:
        result = program.execute(context)
    except (RuntimeError, KeyError, TypeError, ValueError) as error:
        raise SelectorRuntimeError(f"CEL runtime error: {error}") from error
    if not isinstance(result, bool):
        raise SelectorRuntimeError(f"CEL result must be a bool, got {type(result).__name__}")
    return result
