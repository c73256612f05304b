"""The router's NATS interfaces: sync inference with the Podway-Stream framing, feedback, and the scoreboard.

Framing (docs/router.md): a streaming request gets `chunk` messages (text deltas) to its inbox, then
exactly one `end` (usage, served deployment and tier) or `error` (reason). A non-streaming request gets exactly
one message, `end` with the whole text or `error`. Error frames also carry `Podway-Rpc-Error`, so a plain
request/reply caller sees an RpcError instead of mistaking the refusal for an answer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from pydantic import ValidationError

from libs.events.catalogue import EventType
from libs.events.inference import (
    FRAME_CHUNK,
    FRAME_END,
    FRAME_ERROR,
    STREAM_HEADER,
    BreakerRow,
    FeedbackRecorded,
    FeedbackReport,
    InferenceCall,
    ScoreboardReply,
    ScoreboardRow,
)
from libs.messaging.rpc import ERROR_HEADER
from libs.messaging.streaming_rpc import IncomingRequest
from libs.router import Router, RouterClock, RouterEvent, RoutingError, StreamCompleted, TextDelta
from services.llm_router.metrics import RouterMetrics
from services.llm_router.overload import InFlightCap, Overloaded
from services.llm_router.wire import ROUTER_REPORTED, answer, infer_request, refusal

log = logging.getLogger(__name__)

CHUNK_HEADERS = {STREAM_HEADER: FRAME_CHUNK}
END_HEADERS = {STREAM_HEADER: FRAME_END}


class SyncInference:
    """Serves `podway.rpc.router.infer`."""

    def __init__(self, router: Router, cap: InFlightCap, metrics: RouterMetrics) -> None:
        self._router = router
        self._cap = cap
        self._metrics = metrics

    async def __call__(self, request: IncomingRequest) -> None:
        shed = self._cap.shedding()
        if shed is not None:  # refuse before parsing: when overloaded, refusals must cost next to nothing
            self._cap.refused += 1
            self._metrics.refused("-", shed.reason)
            await _send_error(request, shed, None)
            return
        try:
            call = InferenceCall.model_validate_json(request.data)
        except ValidationError as exc:
            self._metrics.refused("-", "bad_request")
            await _send_error(request, exc, None)
            return
        try:
            with self._cap.admit():
                if call.stream:
                    await self._stream(request, call)
                else:
                    result = await self._router.infer(infer_request(call))
                    await request.send(answer(result).model_dump_json().encode(), END_HEADERS)
        except Exception as exc:
            if not isinstance(exc, RoutingError | Overloaded):
                log.exception("sync inference %s failed", call.request_id)
            if not isinstance(exc, ROUTER_REPORTED):
                self._metrics.refused(call.feature, refusal(exc, None).reason, self._router.policy.features)
            await _send_error(request, exc, call.request_id)

    async def _stream(self, request: IncomingRequest, call: InferenceCall) -> None:
        events = self._router.stream(infer_request(call))
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    await request.send(event.text.encode(), CHUNK_HEADERS)
                else:
                    assert isinstance(event, StreamCompleted)
                    await request.send(
                        answer(event.result, with_text=False).model_dump_json().encode(), END_HEADERS
                    )
        finally:
            await events.aclose()


async def _send_error(request: IncomingRequest, error: Exception, request_id: str | None) -> None:
    frame = refusal(error, request_id)
    headers = {STREAM_HEADER: FRAME_ERROR, ERROR_HEADER: frame.reason}
    await request.send(frame.model_dump_json().encode(), headers)


class RecentAnswers:
    """Which feature and model answered each recent request, so feedback needs only the request id."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._answers: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._max = max_entries

    def observe(self, event: RouterEvent) -> None:
        if event.type is EventType.INFERENCE_COMPLETED:
            self._answers[event.correlation_id] = (event.payload["feature"], event.payload["model"])
            if len(self._answers) > self._max:
                self._answers.popitem(last=False)

    def get(self, request_id: str) -> tuple[str, str] | None:
        return self._answers.get(request_id)


AnswerLookup = Callable[[str], Awaitable[tuple[str, str] | None]]
"""The feature and model that answered a request, from the audit log: another process of the fleet may have
answered it (the feedback subject is served by a queue group)."""


class Feedback:
    """Serves `podway.inference.feedback`: a quality score feeds the scoreboard and becomes an event."""

    def __init__(
        self,
        router: Router,
        recent: RecentAnswers,
        emit: Callable[[RouterEvent], None],
        clock: RouterClock,
        answered: AnswerLookup | None = None,
    ) -> None:
        self._router = router
        self._recent = recent
        self._emit = emit
        self._clock = clock
        self._answered = answered

    async def __call__(self, request: IncomingRequest) -> None:
        try:
            report = FeedbackReport.model_validate_json(request.data)
        except ValidationError as exc:
            log.warning("malformed feedback: %s", exc)
            await request.send(b"", {ERROR_HEADER: "bad_request"})
            return
        known = self._recent.get(report.request_id)
        if known is None and self._answered is not None and (report.feature is None or report.model is None):
            try:
                known = await self._answered(report.request_id)
            except Exception as exc:  # the audit log is away: the report's own feature and model, if any
                log.warning("feedback for %s: the audit log did not answer: %r", report.request_id, exc)
        recorded = self.record(report, known)
        await request.send(recorded.model_dump_json().encode())

    def record(self, report: FeedbackReport, known: tuple[str, str] | None = None) -> FeedbackRecorded:
        """Record `report` for the feature and model that answered (`known`: looked up by request id; else
        the report's own)."""
        known = known or self._recent.get(report.request_id)
        feature, model = known if known is not None else (report.feature, report.model)
        policy = self._router.policy
        if feature is None or model is None or feature not in policy.features or model not in policy.models:
            log.info("feedback for unknown request %s ignored", report.request_id)
            return FeedbackRecorded(request_id=report.request_id, recorded=False)
        self._router.record_feedback(feature, model, report.score)
        payload = {
            "request_id": report.request_id,
            "feature": feature,
            "model": model,
            "score": report.score,
            "comment": report.comment,
        }
        self._emit(RouterEvent(EventType.INFERENCE_FEEDBACK, report.request_id, self._clock.wall(), payload))
        return FeedbackRecorded(request_id=report.request_id, recorded=True, feature=feature, model=model)


class Scoreboard:
    """Serves `podway.rpc.router.scoreboard`."""

    def __init__(self, router: Router, instance: str) -> None:
        self._router = router
        self._instance = instance

    async def __call__(self, request: IncomingRequest) -> None:
        await request.send(self.reply().model_dump_json().encode())

    def reply(self) -> ScoreboardReply:
        rows = [ScoreboardRow(**dataclasses.asdict(entry)) for entry in self._router.scoreboard.snapshot()]
        breakers = [
            BreakerRow(
                deployment=name,
                state=b.state.value,
                ramp_fraction=b.ramp_fraction,
                window_requests=b.window_requests,
                window_error_rate=round(b.window_error_rate, 4),
                consecutive_failures=b.consecutive_failures,
            )
            for name, b in sorted(self._router.breakers().items())
        ]
        return ScoreboardReply(instance=self._instance, rows=rows, breakers=breakers)
