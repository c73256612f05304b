"""Consumable capacity of shareable devices (`allowMultipleAllocations`), in exact integer milli-units.

A device publishes capacities (`memory: 141Gi`, `cores: 1`); a request consumes `capacity.requests` of
them. A capacity the request does not name is consumed at its `requestPolicy.default` when the device
publishes one, else whole, as upstream does: a request asking nothing takes the device for itself (a
fabric device, with no capacity, is then free to share without bound). Several allocations of one shareable device never add up to more than it has.
Amounts are milli-units (`460m` GPU cores is 460, `20Gi` is 20 Gi x 1000) so that sums are exact."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

from libs.api.quantity import QuantityError, parse_quantity

Amounts = Mapping[str, int]
"""Capacity name (qualified, `gpu.example.com/memory`) -> milli-units."""


def milli_units(quantity: str | int | float) -> int:
    """A quantity in milli-units, rounded up so that a request is never under-counted."""
    return math.ceil(parse_quantity(quantity) * Decimal(1000))


def qualified(name: str, driver: str) -> str:
    """A capacity or attribute name with its domain: unqualified names belong to the device's driver."""
    return name if "/" in name else f"{driver}/{name}"


def parse_amounts(raw: Mapping[str, object], driver: str) -> dict[str, int]:
    """Published capacities (`{memory: {value: 141Gi}}`) or requested ones (`{memory: 20Gi}`) as milli-units
    by qualified name; an unreadable quantity is left out (admission rejects those)."""
    amounts: dict[str, int] = {}
    for name, value in raw.items():
        quantity = value.get("value") if isinstance(value, Mapping) else value
        if not isinstance(quantity, str | int | float):
            continue
        try:
            amounts[qualified(str(name), driver)] = milli_units(quantity)
        except QuantityError:
            continue
    return amounts


def request_defaults(raw: Mapping[str, object], driver: str) -> dict[str, int]:
    """`requestPolicy.default` of each published capacity that has one, in milli-units."""
    defaults: dict[str, int] = {}
    for name, value in raw.items():
        policy = value.get("requestPolicy") if isinstance(value, Mapping) else None
        default = policy.get("default") if isinstance(policy, Mapping) else None
        if isinstance(default, str | int | float):
            try:
                defaults[qualified(str(name), driver)] = milli_units(default)
            except QuantityError:
                continue
    return defaults


def consumption(
    totals: Amounts, requested: Amounts, defaults: Amounts | None = None
) -> dict[str, int] | None:
    """What one allocation of a device with `totals` consumes for a request of `requested`: the named
    amounts, every other capacity at its default or whole. None when the request names a capacity the
    device lacks or asks more than the device has."""
    for name, amount in requested.items():
        if amount > totals.get(name, -1):
            return None
    defaults = defaults or {}
    return {name: requested.get(name, defaults.get(name, total)) for name, total in totals.items()}


def fits(totals: Amounts, consumed: Amounts | None, wanted: Amounts) -> bool:
    """Whether `wanted` still fits a device with `totals` of which `consumed` is already taken."""
    # Loops rather than all(): this runs for every device a share is tried on.
    if not consumed:
        for name, amount in wanted.items():  # noqa: SIM110
            if amount > totals.get(name, 0):
                return False
        return True
    for name, amount in wanted.items():  # noqa: SIM110
        if amount + consumed.get(name, 0) > totals.get(name, 0):
            return False
    return True


def add(consumed: dict[str, int], amounts: Amounts) -> None:
    """Add an allocation's consumption to a device's running total (in place)."""
    for name, amount in amounts.items():
        consumed[name] = consumed.get(name, 0) + amount


def subtract(consumed: dict[str, int], amounts: Amounts) -> None:
    """Take a released allocation's consumption off a device's running total (in place)."""
    for name, amount in amounts.items():
        left = consumed.get(name, 0) - amount
        if left > 0:
            consumed[name] = left
        else:
            consumed.pop(name, None)


def format_milli(amount: int) -> str:
    """Milli-units back as a quantity string (`460m`, `1`, `21474836480`)."""
    whole, rest = divmod(amount, 1000)
    return str(whole) if rest == 0 else f"{amount}m"
