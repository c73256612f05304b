"""`podway infer`, `podway router scoreboard|feedback`, `podway emulators up`, and `RouterClient`, the typed
client of the router's NATS interfaces that these commands, the demo and the benchmarks share."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from libs.client.client import PodwayClient
from libs.client.commands.objects import CliError, nats_url_of
from libs.events.catalogue import RpcSubject, WorkSubject
from libs.events.inference import (
    FRAME_CHUNK,
    FRAME_END,
    FRAME_ERROR,
    INFERENCE_FEEDBACK_SUBJECT,
    ROUTER_FLEET_STATUS_SUBJECT,
    ROUTER_SCOREBOARD_SUBJECT,
    ROUTER_STATUS_SUBJECT,
    STREAM_HEADER,
    BudgetStatus,
    ChatMessage,
    FeedbackRecorded,
    FeedbackReport,
    InferenceAnswer,
    InferenceCall,
    InferenceRefusal,
    InferenceWork,
    RouterStatusReply,
    ScoreboardReply,
)
from libs.messaging.rpc import RpcError, request
from libs.messaging.streaming_rpc import gather_replies, stream_request
from libs.messaging.work_queue import enqueue

DEFAULT_TIMEOUT_S = 30.0
FLEET_QUIET_S = 0.3  # every router process answers at once: a reply later than this after the last is none


class InferenceRefused(Exception):
    """The router answered with an `error` frame."""

    def __init__(self, refusal: InferenceRefusal) -> None:
        super().__init__(f"{refusal.reason}: {refusal.message}")
        self.refusal = refusal


class ProtocolError(Exception):
    """The router broke the framing (a frame out of place)."""


class RouterClient:
    """Calls the router over NATS on the connection of a PodwayClient. A request refused as `overloaded`
    before any answer is sent again after its Retry-After, up to `overload_retries` times."""

    def __init__(
        self, client: PodwayClient, *, timeout_s: float = DEFAULT_TIMEOUT_S, overload_retries: int = 0
    ) -> None:
        self._broker = client.broker
        self.timeout_s = timeout_s
        self.overload_retries = overload_retries

    async def infer(self, call: InferenceCall) -> InferenceAnswer:
        """One answer (the call must not stream); raises InferenceRefused."""
        if call.stream:
            raise ValueError("use stream() for a streaming call")
        async for item in self._frames(call):
            if isinstance(item, InferenceAnswer):
                return item
            raise ProtocolError("a non-streaming answer came as chunks")
        raise ProtocolError("no answer")  # unreachable: _frames ends with an end frame or raises

    async def stream(self, call: InferenceCall) -> AsyncIterator[str | InferenceAnswer]:
        """Text deltas as they arrive, then the InferenceAnswer of the end frame; raises InferenceRefused
        (also after some text: a broken stream is never a clean end)."""
        async for item in self._frames(call.model_copy(update={"stream": True})):
            yield item

    async def _frames(self, call: InferenceCall) -> AsyncIterator[str | InferenceAnswer]:
        for attempt in range(self.overload_retries + 1):
            answered = False
            try:
                async for item in self._frames_once(call):
                    answered = True
                    yield item
                return
            except InferenceRefused as exc:
                refusal = exc.refusal
                if answered or refusal.reason != "overloaded" or attempt == self.overload_retries:
                    raise
                await asyncio.sleep(refusal.retry_after_s or 1.0)

    async def _frames_once(self, call: InferenceCall) -> AsyncIterator[str | InferenceAnswer]:
        replies = stream_request(
            self._broker,
            RpcSubject.ROUTER_INFER,
            call.model_dump_json().encode(),
            frame_header=STREAM_HEADER,
            last_frames=(FRAME_END, FRAME_ERROR),
            idle_timeout_s=self.timeout_s,
        )
        async for reply in replies:
            frame = reply.headers.get(STREAM_HEADER)
            if frame == FRAME_CHUNK:
                yield reply.data.decode()
            elif frame == FRAME_END:
                yield InferenceAnswer.model_validate_json(reply.data)
            elif frame == FRAME_ERROR:
                raise InferenceRefused(InferenceRefusal.model_validate_json(reply.data))
            else:
                raise ProtocolError(f"unexpected frame {frame!r}")

    async def submit(self, call: InferenceCall) -> InferenceWork:
        """Queue the call on the work queue; its outcome is the event inference.completed / failed."""
        fields = set(InferenceCall.model_fields) - {"stream"}
        work = InferenceWork(**call.model_dump(include=fields), submitted_at=datetime.now(UTC))
        await enqueue(
            self._broker, WorkSubject.INFERENCE, work.model_dump_json().encode(), work_id=work.work_id
        )
        return work

    async def feedback(self, report: FeedbackReport) -> FeedbackRecorded:
        """Report an answer's quality; the router's scoreboard takes it and it becomes an event."""
        raw = await request(self._broker, INFERENCE_FEEDBACK_SUBJECT, report, timeout_s=self.timeout_s)
        return FeedbackRecorded.model_validate_json(raw)

    async def status(self) -> RouterStatusReply:
        """One router process's deployments (breaker, ramp step, PT capacity in use) and latest errors."""
        raw = await request(self._broker, ROUTER_STATUS_SUBJECT, b"{}", timeout_s=self.timeout_s)
        return RouterStatusReply.model_validate_json(raw)

    async def fleet_status(self, quiet_s: float = FLEET_QUIET_S) -> list[RouterStatusReply]:
        """Every router process's status (each answers; the replies are gathered until `quiet_s` passes
        without one), ordered by instance."""
        replies = await gather_replies(
            self._broker, ROUTER_FLEET_STATUS_SUBJECT, b"{}", timeout_s=self.timeout_s, quiet_s=quiet_s
        )
        statuses = [RouterStatusReply.model_validate_json(reply.data) for reply in replies]
        return sorted(statuses, key=lambda status: status.instance)

    async def scoreboard(self) -> ScoreboardReply:
        """One router replica's scoreboard and breakers."""
        raw = await request(self._broker, ROUTER_SCOREBOARD_SUBJECT, b"{}", timeout_s=self.timeout_s)
        return ScoreboardReply.model_validate_json(raw)


def user_call(
    feature: str, prompt: str, *, max_tokens: int = 256, system: str | None = None
) -> InferenceCall:
    """A one-prompt call, with an optional system prompt."""
    messages = [ChatMessage(role="system", content=system)] if system else []
    messages.append(ChatMessage(role="user", content=prompt))
    return InferenceCall(feature=feature, messages=messages, max_tokens=max_tokens)


# --- commands ----------------------------------------------------------------------------------------------


def _run(args: argparse.Namespace, work: Callable[[RouterClient], Any]) -> int:
    async def run() -> int:
        async with PodwayClient(nats_url_of(args)) as client:
            code: int = await work(RouterClient(client, timeout_s=args.timeout, overload_retries=2))
            return code

    try:
        return asyncio.run(run())
    except InferenceRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1


def _summary(answer: InferenceAnswer) -> str:
    moves = " -> ".join(f"{a.deployment}({a.reason})" for a in answer.attempts)
    return (
        f"[{answer.deployment} {answer.served_tier}; tokens {answer.usage.input_tokens}/"
        f"{answer.usage.output_tokens}; {answer.latency_ms:.1f} ms, router {answer.added_ms:.2f} ms; "
        f"attempts {moves}; request {answer.request_id}]"
    )


def _print_json(model: BaseModel | dict[str, Any]) -> None:
    data = model.model_dump(mode="json") if isinstance(model, BaseModel) else model
    print(json.dumps(data, indent=2))


def cmd_infer(args: argparse.Namespace) -> int:
    call = user_call(args.feature, args.prompt, max_tokens=args.max_tokens, system=args.system)

    async def work(router: RouterClient) -> int:
        if args.async_:
            queued = await router.submit(call)
            if args.output == "json":
                _print_json({"request_id": queued.request_id, "work_id": str(queued.work_id), "queued": True})
            else:
                print(
                    f"queued request {queued.request_id}; see `podway events --request {queued.request_id}`"
                )
            return 0
        if not args.stream:
            answer = await router.infer(call)
            if args.output == "json":
                _print_json(answer)
            else:
                print(answer.text)
                print(_summary(answer), file=sys.stderr)
            return 0
        texts: list[str] = []
        async for item in router.stream(call):
            if isinstance(item, str):
                texts.append(item)
                if args.output != "json":
                    print(item, end="", flush=True)
                continue
            if args.output == "json":
                _print_json(item.model_copy(update={"text": "".join(texts)}))
            else:
                print()
                print(_summary(item), file=sys.stderr)
        return 0

    return _run(args, work)


def cmd_scoreboard(args: argparse.Namespace) -> int:
    async def work(router: RouterClient) -> int:
        board = await router.scoreboard()
        if args.output == "json":
            _print_json(board)
            return 0
        print(f"router {board.instance}")
        print(
            f"{'FEATURE':<18} {'MODEL':<16} {'REQS':>6} {'ERR%':>6} {'LAT_MS':>8} {'TTFT_MS':>8} {'COST':>9} {'FEEDBACK':>9}"
        )
        for r in board.rows:
            feedback = f"{r.feedback_mean:.2f}/{r.feedback_count}" if r.feedback_mean is not None else "-"
            print(
                f"{r.feature:<18} {r.model:<16} {r.requests:>6} {r.error_rate * 100:>5.1f}% "
                f"{r.latency_ms_ewma:>8.1f} {r.first_byte_ms_ewma:>8.1f} {r.cost:>9.5f} {feedback:>9}"
            )
        print(f"\n{'DEPLOYMENT':<18} {'BREAKER':<10} {'RAMP':>5} {'WINDOW':>7} {'ERR%':>6} {'CONSEC':>6}")
        for b in board.breakers:
            print(
                f"{b.deployment:<18} {b.state:<10} {b.ramp_fraction:>5.2f} {b.window_requests:>7} "
                f"{b.window_error_rate * 100:>5.1f}% {b.consecutive_failures:>6}"
            )
        return 0

    return _run(args, work)


def cmd_status(args: argparse.Namespace) -> int:
    async def work(router: RouterClient) -> int:
        fleet = await router.fleet_status()
        if args.output == "json":
            print(json.dumps([status.model_dump(mode="json") for status in fleet], indent=2))
            return 0
        for status in fleet:
            _print_process_status(status)
        budgets = next((status.budgets for status in fleet if status.budgets), [])
        _print_budgets(budgets)
        return 0

    return _run(args, work)


def _print_process_status(status: RouterStatusReply) -> None:
    print(f"router process {status.instance}")
    print(
        f"{'DEPLOYMENT':<18} {'PROVIDER':<9} {'TIER':<12} {'BREAKER':<10} {'RAMP':<11} {'WINDOW':>6} "
        f"{'ERR%':>6} {'CONSEC':>6} {'1ST BYTE':>9} {'SCORE':>7}  PT IN USE"
    )
    for d in status.deployments:
        ramp = f"{d.ramp_fraction:.2f}" + (f" step {d.ramp_step}" if d.ramp_step is not None else "")
        if d.reopens_in_s is not None:
            ramp = f"probe {d.reopens_in_s:.1f}s"
        pt = "-"
        if d.pt_tokens_per_minute is not None:
            pt = f"{d.pt_tokens_in_use or 0:.0f}/{d.pt_tokens_per_minute} tok/min"
            if d.pt_concurrency is not None:
                pt += f", {d.pt_in_flight}/{d.pt_concurrency} in flight"
        first_byte = f"{d.first_byte_ms:.0f}ms" if d.first_byte_ms is not None else "-"
        score = f"{d.evidence_score:.3f}" if d.evidence_score is not None else "-"
        print(
            f"{d.deployment:<18} {d.provider:<9} {d.tier:<12} {d.state:<10} {ramp:<11} "
            f"{d.window_requests:>6} {d.window_error_rate * 100:>5.1f}% {d.consecutive_failures:>6} "
            f"{first_byte:>9} {score:>7}  {pt}"
        )
    for x in status.experiments:
        arms = ", ".join(
            f"route {a.route_index} ({a.models[0]}): {a.feedback_count} scores"
            + (f", mean {a.feedback_mean:.3f}" if a.feedback_mean is not None else "")
            for a in x.arms
        )
        verdict = (
            f"concluded: route {x.winner_route_index}" if x.winner_route_index is not None else "running"
        )
        print(f"experiment {x.feature} [{verdict}] {arms}")
    print("RECENT ERRORS" if status.recent_errors else "no recent errors")
    for e in status.recent_errors:
        code = f" {e.code}" if e.code else ""
        code += f" ({e.status})" if e.status else ""
        print(f"{e.at:%H:%M:%S} {e.deployment or '-':<18} {e.reason:<14}{code}  {e.feature} {e.request_id}")
    print()


def _print_budgets(budgets: list[BudgetStatus]) -> None:
    """The shared budgets as the fleet's ledgers hold them: every router process's share."""
    if not budgets:
        return
    print(f"\nSHARED BUDGETS (every router process)\n{'LEDGER':<34} {'PER MINUTE':>12} {'POOL':>12}  HELD BY")
    for b in budgets:
        held = ", ".join(f"{h.process} {h.tokens:.0f}" for h in b.holders) or "-"
        print(f"{b.key:<34} {b.tokens_per_minute:>12} {b.pool:>12.0f}  {held}")


def cmd_audit_gaps(args: argparse.Namespace) -> int:
    from libs.client.audit_gaps import audit_gaps
    from libs.client.commands.stack import settings_from
    from libs.runtime.stack import running_stack

    text = sys.stdin.read() if str(args.answered) == "-" else args.answered.read_text()
    ids = [line.strip() for line in text.splitlines() if line.strip()]
    settings = settings_from(args)
    info = running_stack(settings)
    url = settings.database_url or (info.database_url if info else settings.resolved_database_url())
    gaps = asyncio.run(audit_gaps(url, ids))
    _print_json(
        {
            "answered": gaps.answered,
            "audited": gaps.audited,
            "missing": len(gaps.missing),
            "missing_ids": gaps.missing,
        }
    )
    return 0 if not gaps.missing else 3


def cmd_feedback(args: argparse.Namespace) -> int:
    report = FeedbackReport(request_id=args.request_id, score=args.score, comment=args.comment)

    async def work(router: RouterClient) -> int:
        recorded = await router.feedback(report)
        if args.output == "json":
            _print_json(recorded)
        elif recorded.recorded:
            print(f"feedback {args.score} recorded for {recorded.feature}/{recorded.model}")
        else:
            print(f"the router does not know request {args.request_id}", file=sys.stderr)
        return 0 if recorded.recorded else 1

    return _run(args, work)


def cmd_emulators_up(args: argparse.Namespace) -> int:
    from libs.emulators import RunningEmulators, serve_forever

    def announce(emulators: RunningEmulators) -> None:
        print(f"bedrock emulator: {emulators.bedrock_url}\nvertex emulator:  {emulators.vertex_url}")
        print(f"export PODWAY_BEDROCK_ENDPOINT={emulators.bedrock_url}")
        print(f"export PODWAY_VERTEX_ENDPOINT={emulators.vertex_url}", flush=True)

    asyncio.run(serve_forever(args.bedrock_port, args.vertex_port, host=args.host, on_ready=announce))
    return 0


def _guard(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (CliError, RpcError, ProtocolError, ValueError) as exc:
            print(exc, file=sys.stderr)
            return 1

    return run


def register(sub: argparse._SubParsersAction[Any], common: Callable[[argparse.ArgumentParser], None]) -> None:
    infer = sub.add_parser("infer", help="ask the LLM router (over NATS)")
    common(infer)
    infer.add_argument("prompt")
    infer.add_argument("--feature", required=True, help="product feature of the routing policy")
    infer.add_argument("--stream", action="store_true", help="print the answer as it arrives")
    infer.add_argument("--async", dest="async_", action="store_true", help="queue it on the work queue")
    infer.add_argument("--max-tokens", type=int, default=256)
    infer.add_argument("--system", default=None, help="system prompt")
    infer.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds to wait for a reply")
    infer.add_argument("-o", "--output", choices=["text", "json"], default="text")
    infer.set_defaults(handler=_guard(cmd_infer))

    router = sub.add_parser("router", help="the LLM router's status, scoreboard and feedback")
    verbs = router.add_subparsers(dest="router_command", required=True, metavar="VERB")
    board = verbs.add_parser("scoreboard", help="per feature x model figures and the breakers")
    common(board)
    board.add_argument("-o", "--output", choices=["table", "json"], default="table")
    board.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    board.set_defaults(handler=_guard(cmd_scoreboard))
    status = verbs.add_parser(
        "status",
        help="every router process: each deployment's breaker state, ramp step, PT capacity in use, and "
        "recent errors; and the shared budgets",
    )
    common(status)
    status.add_argument("-o", "--output", choices=["table", "json"], default="table")
    status.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    status.set_defaults(handler=_guard(cmd_status))
    gaps = verbs.add_parser(
        "audit-gaps",
        help="which answered request ids (one per line, from a file or - for stdin) have no audit row",
    )
    common(gaps)
    gaps.add_argument("answered", type=Path, help="file of request ids, or - for stdin")
    gaps.set_defaults(handler=_guard(cmd_audit_gaps))
    feedback = verbs.add_parser("feedback", help="report the quality of an answer (score in [0, 1])")
    common(feedback)
    feedback.add_argument("request_id")
    feedback.add_argument("score", type=float)
    feedback.add_argument("--comment", default=None)
    feedback.add_argument("-o", "--output", choices=["text", "json"], default="text")
    feedback.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    feedback.set_defaults(handler=_guard(cmd_feedback))

    emulators = sub.add_parser("emulators", help="the local Bedrock and Vertex AI emulators")
    emulator_verbs = emulators.add_subparsers(dest="emulators_command", required=True, metavar="VERB")
    up = emulator_verbs.add_parser("up", help="serve both emulators until interrupted")
    up.add_argument("--bedrock-port", type=int, default=0, help="0 picks a free port")
    up.add_argument("--vertex-port", type=int, default=0, help="0 picks a free port")
    up.add_argument("--host", default="127.0.0.1")
    up.set_defaults(handler=cmd_emulators_up)
