"""`podway router status`: each deployment's breaker and ramp step, the PT capacity in use, the latest errors."""

from __future__ import annotations

import time

from libs.client.commands.router import cmd_status
from libs.events.inference import (
    DeploymentStatus,
    ExperimentArmStatus,
    ExperimentStatus,
    RouterStatusReply,
)
from libs.router import ManualClock
from services.llm_router.wire import infer_request
from tests.integration.router_service.conftest import CLAUDE_FIRST, StackFactory, ask


async def test_status_shows_an_open_breaker_the_pt_capacity_used_and_why(make_stack: StackFactory):
    stack = await make_stack(CLAUDE_FIRST)
    stack.emulators.bedrock.start_outage()
    for i in range(5):  # Claude PT and OD fail, Gemini answers
        await stack.router.infer(ask(request_id=f"status-{i}"))

    status = await stack.router.status()

    rows = {row.deployment: row for row in status.deployments}
    assert rows["claude-haiku-pt"].state == "open"
    assert rows["claude-haiku-pt"].ramp_fraction == 0.0
    assert rows["claude-haiku-pt"].reopens_in_s is not None
    assert rows["gemini-flash-od"].state == "closed"
    assert rows["gemini-flash-pt"].pt_tokens_per_minute == 300000
    assert rows["gemini-flash-pt"].pt_tokens_in_use is not None
    assert rows["gemini-flash-pt"].pt_tokens_in_use > 0
    assert rows["claude-haiku-od"].pt_tokens_per_minute is None
    latest = status.recent_errors[0]
    assert latest.request_id == "status-4"
    assert latest.deployment in {"claude-haiku-pt", "claude-haiku-od"}
    assert latest.reason == "unavailable"
    assert latest.status == 503
    answered = rows["gemini-flash-pt"]
    assert answered.first_byte_ms is not None
    assert answered.evidence_score is not None
    assert answered.evidence_samples is not None
    assert answered.evidence_samples > 0
    assert rows["gemini-flash-od"].first_byte_ms is None, "no attempt, no evidence"


def test_the_status_table_names_each_deployment(capsys, monkeypatch):
    reply = RouterStatusReply(
        instance="1",
        deployments=[
            DeploymentStatus(
                deployment="claude-haiku-pt",
                provider="bedrock",
                tier="provisioned",
                state="half_open",
                ramp_fraction=0.05,
                ramp_step=1,
                window_requests=7,
                window_error_rate=0.0,
                consecutive_failures=0,
                reopens_in_s=None,
                pt_tokens_per_minute=400000,
                pt_tokens_in_use=1200.0,
                pt_in_flight=2,
                pt_concurrency=32,
                first_byte_ms=142.0,
                evidence_score=0.213,
                evidence_samples=12.0,
            )
        ],
        recent_errors=[],
        experiments=[
            ExperimentStatus(
                feature="search-answer",
                key="k",
                winner_route_index=None,
                arms=[
                    ExperimentArmStatus(
                        route_index=0, models=["gemini-flash"], feedback_count=12, feedback_mean=0.5
                    ),
                    ExperimentArmStatus(
                        route_index=1, models=["claude-haiku"], feedback_count=0, feedback_mean=None
                    ),
                ],
            )
        ],
    )

    other = RouterStatusReply(instance="2", deployments=[], recent_errors=[])

    class FakeRouter:
        async def fleet_status(self) -> list[RouterStatusReply]:
            return [reply, other]

    async def run(work):
        return await work(FakeRouter())

    monkeypatch.setattr(
        "libs.client.commands.router._run", lambda args, work: __import__("asyncio").run(run(work))
    )
    args = type("Args", (), {"output": "table"})()
    assert cmd_status(args) == 0
    out = capsys.readouterr().out
    assert "router process 1" in out
    assert "router process 2" in out, "every process of the fleet"
    assert "claude-haiku-pt" in out
    assert "half_open" in out
    assert "0.05 step 1" in out
    assert "1200/400000 tok/min, 2/32 in flight" in out
    assert "142ms   0.213" in out
    assert (
        "experiment search-answer [running] route 0 (gemini-flash): 12 scores, mean 0.500, "
        "route 1 (claude-haiku): 0 scores" in out
    )
    assert "no recent errors" in out


async def test_status_shows_each_shared_budget_with_every_process_holding_a_share(make_stack: StackFactory):
    clock = ManualClock(wall_start=time.time())  # one fleet, one clock: a replica started later is not ahead
    first = await make_stack(feature={"budget": {"tokens_per_minute": 100_000}}, clock=clock)
    await make_stack(feature={"budget": {"tokens_per_minute": 100_000}}, instance="1", clock=clock)

    status = await first.router.status()

    budgets = {b.key: b for b in status.budgets}
    feature = budgets["feature.search-answer"]
    assert feature.tokens_per_minute == 100_000
    assert sorted(h.process.split(".")[0] for h in feature.holders) == ["0", "1"]
    assert feature.pool + sum(h.tokens for h in feature.holders) <= 100_000
    assert "pt.gemini-flash-pt" in budgets


async def test_the_fleets_status_has_every_router_process_and_each_ones_own_breakers(
    make_stack: StackFactory,
):
    clock = ManualClock(wall_start=time.time())
    first = await make_stack(CLAUDE_FIRST, clock=clock)
    second = await make_stack(CLAUDE_FIRST, instance="1", clock=clock)
    first.emulators.bedrock.start_outage()
    router = first.service.router
    assert router is not None
    for i in range(5):  # through the first process: Claude PT and OD fail, Gemini answers
        await router.infer(infer_request(ask(request_id=f"fleet-{i}")))

    fleet = await second.router.fleet_status()

    assert [status.instance for status in fleet] == ["0", "1"]
    states = {s.instance: {d.deployment: d.state for d in s.deployments} for s in fleet}
    assert states["0"]["claude-haiku-pt"] == "open"
    assert all(status.budgets for status in fleet), "each reply carries the fleet's ledgers"
