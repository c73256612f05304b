"""Retention ages as `podway gc --older-than` reads them (the compose and Kubernetes files: tests/unit/deploy)."""

from pathlib import Path

import pytest

from libs.client.commands.stack import parse_age

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("text", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("45m", 2700), ("9s", 9)])
def test_retention_ages_parse(text, seconds):
    assert parse_age(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "d", "3x", "1.5h", "-1d"])
def test_a_bad_retention_age_is_refused(text):
    with pytest.raises(ValueError, match="invalid age"):
        parse_age(text)
