"""Kubernetes quantities as exact numbers: cpu in millicores, everything else in whole units."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from libs.api.quantity import (
    FORMAT_ERROR,
    SUFFIX_ERROR,
    QuantityError,
    canonical_amount,
    canonical_amounts,
    cel_number,
    format_amount,
    milli_value,
    parse_quantity,
    quantity_error,
    value,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16", Decimal(16)),
        ("500m", Decimal("0.5")),
        ("64Gi", Decimal(64 * 2**30)),
        ("141Gi", Decimal(141 * 2**30)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1.5e-3", Decimal("0.0015")),
        ("2k", Decimal(2000)),
        ("1M", Decimal(10**6)),
        ("1E", Decimal(10**18)),
        ("3Ki", Decimal(3072)),
        ("100n", Decimal("0.0000001")),
        ("5u", Decimal("0.000005")),
        ("+7", Decimal(7)),
        ("-1", Decimal(-1)),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("0.1Gi", Decimal("0.1") * 2**30),
    ],
)
def test_parse_quantity_is_exact(text, expected):
    assert parse_quantity(text) == expected


def test_numbers_are_quantities_too():
    assert parse_quantity(16) == Decimal(16)
    assert parse_quantity(0.5) == Decimal("0.5")


@pytest.mark.parametrize("text", ["", "abc", "1 Gi", "Gi", "1.2.3", "--1", "1Gi ", "0x10"])
def test_malformed_quantities_fail_with_the_api_server_message(text):
    with pytest.raises(QuantityError) as caught:
        parse_quantity(text)
    assert str(caught.value) == (
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
    assert quantity_error(text) == FORMAT_ERROR


@pytest.mark.parametrize("text", ["1Mi2", "1kk", "1e", "1iK"])
def test_unknown_suffixes_fail(text):
    assert quantity_error(text) == SUFFIX_ERROR


def test_cpu_counts_in_millicores_and_other_resources_in_whole_units_rounded_up():
    assert canonical_amount("cpu", "16") == 16_000
    assert canonical_amount("cpu", "500m") == 500
    assert canonical_amount("cpu", "0.0001") == 1
    assert canonical_amount("memory", "64Gi") == 68_719_476_736
    assert canonical_amount("memory", "100m") == 1
    assert canonical_amount("nvidia.com/gpu", "2") == 2
    assert canonical_amounts({"cpu": "1", "memory": "1Ki"}) == {"cpu": 1000, "memory": 1024}


def test_value_and_milli_value_round_up():
    assert value("1.5") == 2
    assert milli_value("1.0001m") == 2


def test_cel_numbers_are_ints_when_whole():
    assert cel_number("141Gi") == 151_397_597_184
    assert cel_number("460m") == pytest.approx(0.46)


@given(
    st.integers(min_value=0, max_value=10**15), st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"])
)
def test_integers_with_any_suffix_scale_exactly(number, suffix):
    scale = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[
        suffix
    ]
    assert parse_quantity(f"{number}{suffix}") == number * scale
    assert value(f"{number}{suffix}") == number * scale


@given(st.decimals(min_value=0, max_value=10**9, places=3, allow_nan=False, allow_infinity=False))
def test_millicores_round_trip_through_the_m_suffix(amount):
    millis = int(amount * 1000)
    assert milli_value(f"{millis}m") == millis
    assert canonical_amount("cpu", f"{millis}m") == millis


@pytest.mark.parametrize(
    ("resource", "amount", "written"),
    [
        ("cpu", 0, "0"),
        ("cpu", 2500, "2500m"),
        ("cpu", 2000, "2"),
        ("cpu", 448000, "448"),
        ("cpu", 1_000_000, "1k"),
        ("memory", 512 * 2**30, "512Gi"),
        ("memory", 20 * 2**40, "20Ti"),
        ("memory", 1000, "1k"),
        ("memory", 1_500_000_000, "1500000000"),
        ("hugepages-2Mi", 4 * 2**20, "4Mi"),
        ("nvidia.com/gpu", 8, "8"),
        ("nvidia.com/gpu", 1500, "1500"),
        ("nvidia.com/gpu", 2000, "2k"),
    ],
)
def test_amounts_are_written_back_as_kueue_writes_usage(resource, amount, written):
    assert format_amount(resource, amount) == written


@given(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(min_value=0, max_value=10**15))
def test_a_written_amount_reads_back_the_same(resource, amount):
    assert canonical_amount(resource, format_amount(resource, amount)) == amount
