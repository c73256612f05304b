"""Async inference from the `podway.work.inference` work queue: the outcome is an event, written exactly once.

The router's events for the item (spillovers, failovers and `inference.completed` / `inference.failed`) are
captured instead of buffered and returned to the consumer, which writes them with the inbox mark in one
transaction before acking. A feature over its budget is not a failure for queued work: the item is deferred.
The deadline counts from when the caller queued the item.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pydantic import ValidationError

from libs.events.catalogue import EventType
from libs.events.envelope import Envelope
from libs.events.inference import InferenceWork
from libs.messaging.work_queue import Deferral, MalformedWork
from libs.router import BudgetExceeded, Router, RouterClock, RouterEvent, RoutingError
from services.llm_router.audit import OUTCOME_TYPES, AuditSink, CausalChain
from services.llm_router.overload import InFlightCap
from services.llm_router.wire import infer_request, refusal


class AsyncInference:
    """The work handler of the inference queue (see the module docstring)."""

    def __init__(self, router: Router, sink: AuditSink, cap: InFlightCap, clock: RouterClock) -> None:
        self._router = router
        self._sink = sink
        self._cap = cap
        self._clock = clock

    def identify(self, data: bytes) -> uuid.UUID:
        return self._parse(data).work_id

    async def perform(self, data: bytes) -> Sequence[Envelope] | Deferral:
        work = self._parse(data)
        remaining_ms = self._remaining_ms(work)
        with self._cap.hold(), self._sink.capture(work.request_id) as captured:
            if remaining_ms is not None and remaining_ms <= 0:
                self._sink(self._failed(work, "deadline_exceeded", "queued longer than its deadline"))
            else:
                try:
                    await self._router.infer(infer_request(work, deadline_ms=remaining_ms))
                except BudgetExceeded as exc:
                    return Deferral(exc.retry_after_s, exc.reason)
                except RoutingError as exc:
                    if not any(event.type in OUTCOME_TYPES for event in captured):
                        self._sink(self._failed(work, exc.reason, str(exc)))
        chain = CausalChain()
        chain.start(work.request_id, str(work.work_id))
        return chain.envelopes(captured)

    def _remaining_ms(self, work: InferenceWork) -> int | None:
        feature = self._router.policy.features.get(work.feature)
        if feature is None:
            return None  # the router refuses it as an unknown feature
        queued_ms = (self._clock.wall() - work.submitted_at.timestamp()) * 1000.0
        return int(feature.deadline_ms - queued_ms)

    def _failed(self, work: InferenceWork, reason: str, detail: str) -> RouterEvent:
        payload = {
            "request_id": work.request_id,
            "feature": work.feature,
            "reason": reason,
            "detail": detail,
            "attempts": [],
        }
        return RouterEvent(EventType.INFERENCE_FAILED, work.request_id, self._clock.wall(), payload)

    @staticmethod
    def _parse(data: bytes) -> InferenceWork:
        try:
            work = InferenceWork.model_validate_json(data)
        except ValidationError as exc:
            raise MalformedWork(refusal(exc, None).message) from exc
        if work.stream:
            raise MalformedWork("queued work cannot stream: its outcome is an event")
        return work
