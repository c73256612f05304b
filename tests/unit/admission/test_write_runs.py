"""A decision's writes go to the store in runs: consecutive creates together, consecutive replacements
together, each run naming an object once, in the order decided; or, on PostgreSQL, in one statement when
the group names each object once and removes none."""

from __future__ import annotations

from datetime import UTC, datetime

from libs.core.admission.model import BatchDecision, EmittedEvent, ObjectRemoval, ObjectWrite
from libs.events.admission import ObjectDeleted
from services.admission.store import _runs, writes_at_once

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def write(name: str, expected: int) -> ObjectWrite:
    return ObjectWrite(
        kind="Pod",
        api_version="v1",
        namespace="ml",
        name=name,
        uid=f"uid-{name}",
        spec={},
        metadata={"name": name},
        status={},
        expected_resource_version=expected,
    )


def event(correlation_id: str) -> EmittedEvent:
    return EmittedEvent(ObjectDeleted(kind="Pod", name="x", uid="uid-x"), correlation_id)


def removal(name: str) -> ObjectRemoval:
    return ObjectRemoval(
        kind="Pod", namespace="ml", name=name, uid=f"uid-{name}", expected_resource_version=1
    )


def names(runs: list[list[ObjectWrite]]) -> list[list[tuple[str, int]]]:
    return [[(w.name, w.expected_resource_version) for w in run] for run in runs]


def test_consecutive_writes_of_one_sort_go_together_in_order() -> None:
    writes = [write("a", 0), write("b", 0), write("c", 3), write("d", 7), write("e", 0)]

    assert names(_runs(writes)) == [[("a", 0), ("b", 0)], [("c", 3), ("d", 7)], [("e", 0)]]


def test_an_object_written_twice_starts_a_new_run_so_its_writes_keep_their_order() -> None:
    writes = [write("a", 0), write("a", 1), write("b", 2), write("b", 3), write("c", 4)]

    assert names(_runs(writes)) == [[("a", 0)], [("a", 1), ("b", 2)], [("b", 3), ("c", 4)]]


def test_no_writes_no_runs() -> None:
    assert _runs([]) == []


def test_one_statement_takes_a_groups_creates_replacements_and_events() -> None:
    decisions = [
        BatchDecision(writes=[write("a", 0), write("b", 4)], events=[event("one")]),
        BatchDecision(writes=[write("c", 0)], events=[event("two")]),
    ]

    at_once = writes_at_once(decisions, now=T0)

    assert at_once is not None
    assert [d.name for d in at_once.creates] == ["a", "c"]
    assert [(d.name, expected) for d, expected in at_once.replacements] == [("b", 4)]
    assert [e.correlation_id for e in at_once.events] == ["one", "two"]
    assert {e.occurred_at for e in at_once.events} == {T0}


def test_one_statement_cannot_write_an_object_twice_or_remove_one() -> None:
    twice = [BatchDecision(writes=[write("a", 0)]), BatchDecision(writes=[write("a", 1)])]
    removing = [BatchDecision(writes=[write("a", 0)], removals=[removal("b")])]

    assert writes_at_once(twice, now=T0) is None
    assert writes_at_once(removing, now=T0) is None
