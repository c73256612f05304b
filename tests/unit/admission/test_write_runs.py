"""A decision's writes go to the store in runs: consecutive creates together, consecutive replacements
together, each run naming an object once, in the order decided."""

from __future__ import annotations

from libs.core.admission.model import ObjectWrite
from services.admission.store import _runs


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
