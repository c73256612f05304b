"""An event whose handling failed because the database was away (restarting, failing over) is not poison: it
comes back until the database does, however many deliveries that takes, and is applied once."""

from __future__ import annotations

from nats.js import JetStreamContext

from libs.db.ports import UnitOfWork
from libs.events.catalogue import DLQ_STREAM
from libs.events.envelope import Envelope, EventPayload
from libs.messaging.broker import make_broker
from tests.conftest import SQLITE_ONLY
from tests.integration.messaging.conftest import running, stream_messages
from tests.integration.messaging.test_event_consumer import (
    SUBJECT,
    AdmitJob,
    UowFactory,
    job_submitted,
    make_consumer,
    settled,
)


class AdmitJobOnceTheDatabaseIsBack(AdmitJob):
    """Refused a connection the first `outage` times, as while no listed server is writable."""

    def __init__(self, outage: int) -> None:
        super().__init__()
        self.outage = outage

    async def __call__(self, envelope: Envelope, payload: EventPayload, uow: UnitOfWork) -> None:
        if len(self.calls) < self.outage:
            self.calls.append(envelope.event_id)
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
        await super().__call__(envelope, payload, uow)


@SQLITE_ONLY
async def test_an_event_is_redelivered_past_max_deliver_while_the_database_is_away(
    nats_url: str, js: JetStreamContext, uow_factory: UowFactory
) -> None:
    handler = AdmitJobOnceTheDatabaseIsBack(outage=4)
    broker = make_broker(nats_url, "admission")
    consumer = make_consumer(handler, uow_factory, max_deliver=3)
    consumer.subscribe(broker)
    event = job_submitted("req-waited")
    async with running(broker, consumer):
        await js.publish(SUBJECT, event.to_bytes())
        await settled(js, 1)

    assert handler.calls == [event.event_id] * 5
    assert await stream_messages(js, DLQ_STREAM) == []
    async with uow_factory() as uow:
        assert await uow.objects.get("Job", "ml", "req-waited") is not None
