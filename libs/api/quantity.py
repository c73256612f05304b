"""Kubernetes resource quantities ("16", "500m", "64Gi", "1e3") as exact decimals and integers.

CPU is counted in millicores and everything else in whole units (bytes, devices), rounded up the way
`resource.Quantity.MilliValue()` / `Value()` round, so that no request is ever under-counted."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal, localcontext
from functools import lru_cache
from typing import Final

QUANTITY_REGEX: Final = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR: Final = f"quantities must match the regular expression '{QUANTITY_REGEX}'"
SUFFIX_ERROR: Final = "unable to parse quantity's suffix"

_QUANTITY_RE: Final = re.compile(QUANTITY_REGEX)
_NUMBER_RE: Final = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT_RE: Final = re.compile(r"^[eE]([+-]?[0-9]+)$")

_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}

CPU: Final = "cpu"


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message is the API server's."""


def parse_quantity(text: str | int | float) -> Decimal:
    """The exact value of a quantity: `parse_quantity("64Gi") == Decimal(68719476736)`.

    Numbers are accepted too, as JSON numbers are on the wire. Raises QuantityError with the API
    server's message when the text is not a quantity. Results are cached per input (Decimals are
    immutable), since the same few quantities ("8", "64Gi", "1") come back on every pod."""
    try:
        return _parse_quantity(text)
    except TypeError:  # unhashable input: parse it uncached, to fail exactly as before
        return _parse_quantity.__wrapped__(text)


# typed: 1, 1.0 and True hash alike but parse differently ("1", "1.0", an error).
@lru_cache(maxsize=4096, typed=True)
def _parse_quantity(text: str | int | float) -> Decimal:
    raw = str(text).strip() if isinstance(text, int | float) else text
    if not raw or not _QUANTITY_RE.match(raw):
        raise QuantityError(FORMAT_ERROR)
    number = _NUMBER_RE.match(raw)
    assert number is not None  # the quantity regex guarantees a (possibly empty) number prefix
    sign, whole, fraction = number.group(1), number.group(2), number.group(3) or ""
    suffix = raw[number.end() :]
    if suffix and suffix[0] in "+-0123456789.":
        raise QuantityError(FORMAT_ERROR)
    with localcontext() as context:
        context.prec = 80
        magnitude = Decimal(f"{whole or '0'}.{fraction or '0'}") * _multiplier(suffix)
        return -magnitude if sign == "-" else magnitude


def _multiplier(suffix: str) -> Decimal:
    if suffix in _BINARY_SUFFIXES:
        return Decimal(2) ** _BINARY_SUFFIXES[suffix]
    if suffix in _DECIMAL_SUFFIXES:
        return Decimal(10) ** _DECIMAL_SUFFIXES[suffix]
    exponent = _EXPONENT_RE.match(suffix)
    if exponent is None:
        raise QuantityError(SUFFIX_ERROR)
    return Decimal(10) ** int(exponent.group(1))


def quantity_error(text: str | int | float) -> str | None:
    """The API server's message for a bad quantity, or None when the text parses."""
    try:
        parse_quantity(text)
    except QuantityError as error:
        return str(error)
    return None


def value(text: str | int | float) -> int:
    """Whole units, rounded up (`Quantity.Value()`): `value("1.5Gi") == 1610612736`, `value("100m") == 1`."""
    return math.ceil(parse_quantity(text))


def milli_value(text: str | int | float) -> int:
    """Thousandths of a unit, rounded up (`Quantity.MilliValue()`): `milli_value("16") == 16000`."""
    return math.ceil(parse_quantity(text) * 1000)


def canonical_amount(resource_name: str, text: str | int | float) -> int:
    """The integer Podway counts a resource in: millicores for `cpu`, whole units (bytes, devices) otherwise."""
    return milli_value(text) if resource_name == CPU else value(text)


def canonical_amounts(resources: Mapping[str, str | int | float]) -> dict[str, int]:
    """A resource list (`requests`, `allocatable`) in canonical integers, see canonical_amount."""
    return {name: canonical_amount(name, amount) for name, amount in resources.items()}


_DECIMAL_SUFFIX_OF: Final = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX_OF: Final = {0: "", **{power: suffix for suffix, power in _BINARY_SUFFIXES.items()}}
_BINARY_RESOURCES: Final = frozenset({"memory", "ephemeral-storage"})


def format_amount(resource_name: str, amount: int) -> str:
    """A canonical amount back as the quantity Kueue writes for it (`resources.ResourceQuantity`, printed in
    `resource.Quantity`'s canonical form): cpu from millicores (`2500m`, `2`), memory, ephemeral-storage and
    hugepages in binary units (`512Gi`, and `1k` below 1024), anything else in decimal ones (`8`, `2k`)."""
    if resource_name == CPU:
        return _decimal_si(amount, -3)
    if resource_name in _BINARY_RESOURCES or resource_name.startswith("hugepages-"):
        return _binary_si(amount)
    return _decimal_si(amount, 0)


def _decimal_si(mantissa: int, exponent: int) -> str:
    # As Quantity.String(): trailing zeros folded into the exponent, which is then lowered to a multiple of 3.
    if mantissa == 0:
        return "0"
    while mantissa % 10 == 0 and exponent < 18:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return f"{mantissa}{_DECIMAL_SUFFIX_OF[exponent]}"


def _binary_si(amount: int) -> str:
    if -1024 < amount < 1024:
        return _decimal_si(amount, 0)
    power = 0
    while amount % 1024 == 0 and power < 60:
        amount //= 1024
        power += 10
    return f"{amount}{_BINARY_SUFFIX_OF[power]}"


def cel_number(text: str | int | float) -> int | float:
    """A quantity as a CEL number: an int when it is whole (bytes, devices), else a float."""
    exact = parse_quantity(text)
    return int(exact) if exact == exact.to_integral_value() else float(exact)
