"""Experiments run by the whole fleet, against in-memory records: tallies summed across processes, one
conclusion stored and audited, a restarted process resuming its tally and finding the winner, a bus away."""

from __future__ import annotations

import pytest

from libs.core.routing import ExperimentRecord, parse_policy
from libs.events.catalogue import EventType
from libs.router import EventBuffer, ManualClock, Router
from libs.router.example_policy import example_policy_document
from services.llm_router.experiments import RECORD_PREFIX, SharedExperiments
from tests.unit.router_service.test_lease_refresher import MemoryRecords


class Records(MemoryRecords):
    async def read(self, key: str) -> bytes | None:
        if self.away:
            raise ConnectionError("no bus")
        return self.values.get(key)


def process(instance: str, records: Records) -> tuple[Router, SharedExperiments, EventBuffer]:
    document = example_policy_document("http://127.0.0.1:1", "http://127.0.0.1:2")
    document["features"]["search-answer"]["experiment"] = {"confidence": 0.95, "min_feedback": 30}
    events = EventBuffer()
    router = Router(
        parse_policy(document),
        {"bedrock": object(), "vertex": object()},  # type: ignore[dict-item]
        clock=ManualClock(),
        event_sink=events,
    )
    return router, SharedExperiments(router, records, instance), events


def concluded(events: EventBuffer) -> int:
    return len(events.of_type(EventType.ROUTER_EXPERIMENT_CONCLUDED))


def stored(records: Records, router: Router) -> ExperimentRecord:
    (experiment,) = router.experiments()
    return ExperimentRecord.from_json(records.values[RECORD_PREFIX + experiment.key])


async def test_two_processes_conclude_together_and_only_the_first_to_store_it_audits() -> None:
    records = Records()
    first, first_shared, first_events = process("0", records)
    second, second_shared, second_events = process("1", records)
    for _ in range(40):  # each process hears one route only
        first.record_feedback("search-answer", "gemini-flash", 0.0)
        second.record_feedback("search-answer", "claude-haiku", 1.0)
    await first_shared.sync()  # stores its tally
    await second_shared.sync()  # reads it: the fleet's feedback concludes here
    assert second.experiment_winners() == {"search-answer": 1}
    assert stored(records, second).winner is None
    assert concluded(second_events) == 0, "audited once stored: it may not be the fleet's"
    await second_shared.sync()  # the pass the conclusion woke
    assert stored(records, second).concluded_by == "1"
    await first_shared.sync()
    assert first.experiment_winners() == {"search-answer": 1}
    assert (concluded(first_events), concluded(second_events)) == (0, 1)
    assert sorted(stored(records, first).tallies) == ["0", "1"]


async def test_a_process_that_concluded_second_adopts_the_stored_winner_without_auditing() -> None:
    records = Records()
    first, first_shared, first_events = process("0", records)
    second, second_shared, second_events = process("1", records)
    for _ in range(40):
        first.record_feedback("search-answer", "gemini-flash", 0.0)
        first.record_feedback("search-answer", "claude-haiku", 1.0)
        second.record_feedback("search-answer", "gemini-flash", 1.0)  # the other way round
        second.record_feedback("search-answer", "claude-haiku", 0.0)
    assert first.experiment_winners() == {"search-answer": 1}
    assert second.experiment_winners() == {"search-answer": 0}
    await second_shared.sync()
    await first_shared.sync()
    assert first.experiment_winners() == second.experiment_winners() == {"search-answer": 0}
    assert (concluded(first_events), concluded(second_events)) == (0, 1)


async def test_a_restarted_process_resumes_its_tally_and_finds_the_winner() -> None:
    records = Records()
    router, shared, _ = process("0", records)
    for _ in range(20):
        router.record_feedback("search-answer", "gemini-flash", 0.0)
    await shared.sync()
    restarted, restarted_shared, _ = process("0", records)
    restarted.record_feedback("search-answer", "gemini-flash", 0.0)  # answered before the first pass
    await restarted_shared.sync()
    (experiment,) = restarted.experiments()
    assert experiment.own_tally().counts == (21, 0)
    assert stored(records, restarted).tallies["0"].counts == (21, 0)
    records.values[RECORD_PREFIX + experiment.key] = stored(records, restarted).concluded(1, "9").to_json()
    newcomer, newcomer_shared, events = process("2", records)
    await newcomer_shared.sync()
    assert newcomer.experiment_winners() == {"search-answer": 1}
    assert concluded(events) == 0


async def test_a_pass_without_the_bus_changes_nothing_and_the_next_one_stores_everything() -> None:
    records = Records()
    router, shared, events = process("0", records)
    records.away = True
    for _ in range(40):
        router.record_feedback("search-answer", "gemini-flash", 0.0)
        router.record_feedback("search-answer", "claude-haiku", 1.0)
    assert router.experiment_winners() == {"search-answer": 1}, "its own conclusion routes meanwhile"
    with pytest.raises(ConnectionError):
        await shared.sync()
    assert concluded(events) == 0
    records.away = False
    await shared.sync()
    record = stored(records, router)
    # the test stopped counting at its conclusion
    assert (record.winner, record.concluded_by, record.tallies["0"].counts) == (1, "0", (30, 30))
    assert concluded(events) == 1


async def test_an_unreadable_record_is_written_anew() -> None:
    records = Records()
    router, shared, _ = process("0", records)
    (experiment,) = router.experiments()
    records.values[RECORD_PREFIX + experiment.key] = b"not json"
    router.record_feedback("search-answer", "gemini-flash", 0.5)
    await shared.sync()
    assert stored(records, router).tallies["0"].counts == (1, 0)


async def test_a_process_restarted_under_its_name_that_concludes_again_does_not_audit_it_twice() -> None:
    records = Records()
    router, shared, events = process("0", records)
    for _ in range(40):
        router.record_feedback("search-answer", "gemini-flash", 0.0)
        router.record_feedback("search-answer", "claude-haiku", 1.0)
    await shared.sync()
    assert concluded(events) == 1
    restarted, restarted_shared, restarted_events = process("0", records)
    for _ in range(40):  # it concludes on its own before its first pass reads the stored winner
        restarted.record_feedback("search-answer", "gemini-flash", 0.0)
        restarted.record_feedback("search-answer", "claude-haiku", 1.0)
    assert restarted.experiment_winners() == {"search-answer": 1}

    await restarted_shared.sync()

    assert stored(records, restarted).concluded_by == "0"
    assert concluded(restarted_events) == 0
