import json
from datetime import UTC, datetime

import pytest

import libs.events  # noqa: F401
from libs.events.admission import JobExpanded
from libs.events.catalogue import EVENTS_PREFIX, EventType, dlq_subject
from libs.events.envelope import Envelope, uuid7
from libs.events.registry import PAYLOAD_MODELS, UnknownSchemaVersion, parse_payload

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _expanded() -> JobExpanded:
    return JobExpanded(namespace="ml", job_name="j", job_uid="u", gang=True, pod_names=["j-worker-0-0"])


def test_uuid7_ids_sort_by_creation_time():
    ids = [uuid7(unix_ms=ms) for ms in (1_000, 2_000, 3_000)]
    assert [u.version for u in ids] == [7, 7, 7]
    assert sorted(ids) == ids


def test_envelope_round_trips_and_names_its_subject():
    env = Envelope.wrap(_expanded(), producer="admission", correlation_id="c1", occurred_at=T0)
    back = Envelope.from_bytes(env.to_bytes())
    assert back == env
    assert back.nats_subject == "podway.events.job.expanded"
    assert parse_payload(back) == _expanded()


@pytest.mark.parametrize("causation_id", [None, "cause"])
def test_an_envelope_written_with_its_payload_serialised_already_reads_back_the_same(causation_id):
    env = Envelope.wrap(
        _expanded(), producer="admission", correlation_id="c1", occurred_at=T0, causation_id=causation_id
    )
    back = Envelope.from_bytes(env.to_bytes(payload_json=json.dumps(env.payload)))
    assert back == env
    assert parse_payload(back) == _expanded()


def test_a_consumer_accepts_the_current_and_the_previous_schema_version_only():
    env = Envelope.wrap(_expanded(), producer="admission", correlation_id="c1", occurred_at=T0)
    assert parse_payload(env.model_copy(update={"schema_version": 0})) == _expanded()
    with pytest.raises(UnknownSchemaVersion):
        parse_payload(env.model_copy(update={"schema_version": 2}))


def test_payload_models_are_frozen_and_reject_unknown_fields():
    with pytest.raises(ValueError, match="extra"):
        JobExpanded(namespace="ml", job_name="j", job_uid="u", gang=True, pod_names=[], bogus=1)
    with pytest.raises(ValueError, match="frozen"):
        _expanded().gang = False  # type: ignore[misc]


def test_every_registered_model_publishes_under_the_events_prefix():
    for event_type, model in PAYLOAD_MODELS.items():
        assert model.TYPE is event_type
        assert event_type.subject.startswith(EVENTS_PREFIX + ".")
    assert EventType.PODS_BOUND.subject == "podway.events.pods.bound"
    assert dlq_subject("scheduler") == "podway.dlq.scheduler"
