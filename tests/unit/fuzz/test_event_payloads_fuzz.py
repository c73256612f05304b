"""Property-based fuzzing of raw event bytes: whatever arrives on a subject, a consumer either reads one of
the catalogue's events or names a dead-letter reason; no other exception ever escapes to crash it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import libs.events  # noqa: F401  (registers the payload models)
from libs.events.registry import PAYLOAD_MODELS, parse_payload
from libs.messaging.consumer import MalformedEvent, parse_message
from libs.messaging.dead_letters import DeadLetterReason

EVENT_TYPES = sorted(event_type.value for event_type in PAYLOAD_MODELS)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _envelope(event_type: str, payload: Any, **overrides: Any) -> dict[str, Any]:
    document = {
        "event_id": "01900000-0000-7000-8000-000000000000",
        "type": event_type,
        "schema_version": 1,
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
        "producer": "fuzz",
        "correlation_id": "c",
        "payload": payload,
    }
    document.update(overrides)
    return document


def _read(data: bytes) -> None:
    try:
        envelope, payload = parse_message(data, parse_payload)
    except MalformedEvent as exc:
        reason, text = exc.reason, str(exc)
    else:
        assert payload.TYPE.value == envelope.type
        return
    assert reason in set(DeadLetterReason)
    assert text.startswith(f"{reason}: ")


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_read_or_dead_lettered(data: bytes) -> None:
    _read(data)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.dictionaries(st.text(max_size=20), json_values, max_size=6))
def test_every_event_type_with_arbitrary_payloads(event_type: str, payload: dict[str, Any]) -> None:
    _read(json.dumps(_envelope(event_type, payload)).encode())


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(EVENT_TYPES),
    st.sampled_from(["event_id", "type", "schema_version", "occurred_at", "producer", "payload", "subject"]),
    json_values,
)
def test_envelopes_with_one_field_replaced(event_type: str, field: str, value: Any) -> None:
    document = _envelope(event_type, {})
    document[field] = value
    _read(json.dumps(document).encode())


def test_a_deeply_nested_payload_is_dead_lettered_not_a_crash() -> None:
    deep = "[" * 5_000 + "1" + "]" * 5_000
    data = json.dumps(_envelope(EVENT_TYPES[0], {"x": "DEEP"})).replace('"DEEP"', deep).encode()
    with pytest.raises(MalformedEvent) as refused:
        parse_message(data, parse_payload)
    assert refused.value.reason is DeadLetterReason.MALFORMED_ENVELOPE


def test_an_unknown_schema_version_names_its_reason() -> None:
    data = json.dumps(_envelope(EVENT_TYPES[0], {}, schema_version=99)).encode()
    with pytest.raises(MalformedEvent) as refused:
        parse_message(data, parse_payload)
    assert refused.value.reason is DeadLetterReason.UNKNOWN_SCHEMA_VERSION
