"""Router replicas on one bus share a feature's budget through the ledger: the fleet spends at most one
budget (within 5 %), and what a replica held comes back when it stops or dies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from libs.core.routing import LedgerKind, LedgerState, ledger_key
from libs.events.inference import ROUTER_LEDGER_BUCKET
from libs.messaging.broker import jetstream
from libs.messaging.records import KvRecords
from libs.providers import Chunk, Completion, Message, ProviderRequest, Usage
from libs.router import BudgetExceeded, InferRequest, ManualClock
from tests.integration.router_service.conftest import RouterStack, StackFactory

BUDGET = 20_000
REPLICAS = 4
PROMPT = (Message("user", "x" * 400),)  # 100 tokens in, 100 out: each request reserves and uses 200


class ExactProvider:
    """Answers at once and reports exactly the tokens the router reserved: the worst case for a budget."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(self, request: ProviderRequest) -> Completion:
        prompt = sum(len(m.content) for m in request.messages) // 4
        return Completion("ok", Usage(prompt, request.max_tokens), request.tier.value, "end_turn", 0.001)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[Chunk]:
        yield Chunk("ok", Usage(1, 1))

    async def aclose(self) -> None:
        return None


async def start_fleet(make_stack: StackFactory, clock: ManualClock) -> list[RouterStack]:
    providers = {name: ExactProvider(name) for name in ("bedrock", "vertex")}
    feature = {"budget": {"tokens_per_minute": BUDGET}}
    return [
        await make_stack(providers=providers, feature=feature, clock=clock, instance=str(i))
        for i in range(REPLICAS)
    ]


async def spend_until_refused(stack: RouterStack) -> int:
    """Tokens this replica had answered when the fleet's budget ran out (refused again after its refresher
    had a chance to ask the ledger for more)."""
    router = stack.service.router
    assert router is not None
    used = refusals = 0
    while refusals < 10:
        try:
            result = await router.infer(InferRequest("search-answer", PROMPT, max_tokens=100))
        except BudgetExceeded:
            refusals += 1
            await asyncio.sleep(0.02)  # let the background refresh ask the ledger
            continue
        used += result.usage.total_tokens
        refusals = 0
        await asyncio.sleep(0)
    return used


async def ledger(stack: RouterStack) -> LedgerState:
    records = KvRecords(jetstream(stack.service.broker), ROUTER_LEDGER_BUCKET)
    await records.open()
    data = await records.read(ledger_key(LedgerKind.FEATURE, "search-answer"))
    assert data is not None
    return LedgerState.from_json(data)


async def test_replicas_under_load_spend_at_most_the_fleets_budget(make_stack: StackFactory) -> None:
    clock = ManualClock(wall_start=time.time())  # frozen: no refill, so the whole fleet has one budget
    fleet = await start_fleet(make_stack, clock)
    spent = await asyncio.gather(*(spend_until_refused(stack) for stack in fleet))
    assert sum(spent) <= BUDGET * 1.05
    assert sum(spent) >= BUDGET * 0.9  # grants do not strand the budget in idle replicas
    assert all(tokens > 0 for tokens in spent)


async def test_a_stopped_replica_returns_its_grant_and_a_dead_ones_expires(make_stack: StackFactory) -> None:
    clock = ManualClock(wall_start=time.time())
    stopping, dying, survivor, _ = await start_fleet(make_stack, clock)
    holders = {h.process: h.tokens for h in (await ledger(survivor)).holdings}
    assert len(holders) == REPLICAS
    assert all(tokens > 0 for tokens in holders.values())

    pool = (await ledger(survivor)).pool
    await stopping.service.stop()
    returned = await ledger(survivor)
    assert returned.pool == pool + holders[next(p for p in holders if p.startswith("0."))]

    assert dying.service.leases is not None
    assert dying.service.ledger is not None
    dying.service.leases.leases.clear()  # killed: it gives nothing back
    clock.advance(10.0)  # its lease ends; the others renew theirs
    assert survivor.service.ledger is not None
    await survivor.service.ledger.refresh()
    assert not any(h.process.startswith("1.") for h in (await ledger(survivor)).holdings)


def kill(stack: RouterStack) -> None:
    """What SIGKILL leaves of a replica to the fleet: its grants in the ledger, and nobody to return or renew
    them (its refresher stops; its memory of the leases is gone, so its stop at teardown returns nothing)."""
    for task in stack.service._tasks:
        if task.get_name() == "budget-leases":
            task.cancel()
    assert stack.service.leases is not None
    stack.service.leases.leases.clear()


async def test_a_killed_replicas_grant_comes_back_within_its_lease_and_the_refill_of_it(
    make_stack: StackFactory,
) -> None:
    clock = ManualClock(wall_start=time.time())
    killed, *living = await start_fleet(make_stack, clock)
    assert killed.service.leases is not None
    terms = killed.service.leases.terms
    before = await ledger(living[0])
    stranded = next(h.tokens for h in before.holdings if h.process.startswith("0."))
    assert stranded > 0
    assert before.pool + sum(h.tokens for h in before.holdings) == pytest.approx(BUDGET)
    kill(killed)

    async def refreshed(seconds: float) -> LedgerState:
        clock.advance(seconds)
        for stack in living:
            assert stack.service.ledger is not None
            await stack.service.ledger.refresh()
        return await ledger(living[0])

    # Within its lease the dead grant stands: the living can count on no more than the rest of the budget.
    within = await refreshed(terms.lease_s - terms.margin_s)
    assert any(h.process.startswith("0.") for h in within.holdings)
    assert within.pool + sum(h.tokens for h in within.holdings if not h.process.startswith("0.")) <= (
        BUDGET - stranded + 1e-6
    )
    # Past its expiry, and the time the pool takes to refill the room it leaves (and what the living let lapse
    # when they renewed), the whole budget is the living's again.
    living_held = sum(h.tokens for h in within.holdings if not h.process.startswith("0."))
    refill_s = (BUDGET - within.pool - living_held) / (BUDGET / 60.0)
    assert refill_s <= terms.lease_s, "all of it comes back within a lease's time after it expires"
    after = await refreshed(max(terms.margin_s, refill_s) + 0.01)
    assert not any(h.process.startswith("0.") for h in after.holdings)
    assert after.pool + sum(h.tokens for h in after.holdings) == pytest.approx(BUDGET)
