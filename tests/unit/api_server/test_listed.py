"""Objects as lists decoded them, by admission's encoding: an encoding met again at the same revision gives
back the object shown then and its Table row, worked out once; a new encoding or revision is decoded afresh."""

from __future__ import annotations

from typing import Any

import orjson

from libs.kubeapi.resources import lookup
from services.api_server.listed import ListedObjects
from services.api_server.tables import table_of


def encoded(name: str, phase: str = "Pending", labels: dict[str, str] | None = None) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ml",
                "resourceVersion": "1",
                "labels": labels or {},
                "creationTimestamp": "2026-12-06T10:00:00Z",
            },
            "spec": {"nodeName": "node-1"} if phase == "Running" else {},
            "status": {"phase": phase},
        }
    )


def test_an_encoding_met_again_at_its_revision_is_the_object_shown_then() -> None:
    listed = ListedObjects()
    first = listed.shown(encoded("a"), 7)

    assert listed.shown(encoded("a"), 7) is first
    assert first["metadata"]["resourceVersion"] == "7"
    assert first == {**orjson.loads(encoded("a")), "metadata": {**first["metadata"], "resourceVersion": "7"}}


def test_a_new_encoding_or_revision_is_decoded_afresh() -> None:
    listed = ListedObjects()
    before = listed.shown(encoded("a"), 7)

    relabelled = listed.shown(encoded("a", labels={"team": "b"}), 8)
    moved = listed.shown(encoded("a"), 9)

    assert relabelled["metadata"]["labels"] == {"team": "b"}
    assert moved["metadata"]["resourceVersion"] == "9"
    assert before["metadata"]["resourceVersion"] == "7"  # what was shown before is left as it was
    assert listed.shown(encoded("a"), 9) is moved


def test_the_least_recently_listed_go_first_and_nothing_is_kept_at_zero() -> None:
    listed = ListedObjects(kept=2)
    a = listed.shown(encoded("a"), 1)
    b = listed.shown(encoded("b"), 2)
    listed.shown(encoded("a"), 1)  # a is recent again
    listed.shown(encoded("c"), 3)

    assert len(listed) == 2
    assert listed.shown(encoded("a"), 1) is a
    assert listed.shown(encoded("b"), 2) is not b  # b went first: decoded afresh
    keeping_none = ListedObjects(kept=0)
    assert keeping_none.shown(encoded("a"), 1) is not keeping_none.shown(encoded("a"), 1)


def test_a_row_is_worked_out_once_per_object_shown_and_each_time_for_others() -> None:
    listed = ListedObjects()
    obj = listed.shown(encoded("a", phase="Running"), 1)
    worked: list[str] = []

    def row(shown: dict[str, Any]) -> list[Any]:
        worked.append(shown["metadata"]["name"])
        return [shown["status"]["phase"]]

    assert listed.row("Pod", obj, row) == ["Running"]
    assert listed.row("Pod", obj, row) == ["Running"]
    assert listed.row("Pod", {"metadata": {"name": "other"}, "status": {"phase": "Failed"}}, row) == [
        "Failed"
    ]
    assert listed.row("Event", obj, row) == ["Running"]  # another kind's columns are worked out again
    assert worked == ["a", "other", "a"]


def test_a_table_of_listed_objects_reads_as_one_worked_out_each_time() -> None:
    pods = lookup("", "v1", "pods")
    assert pods is not None
    listed = ListedObjects()
    items = [listed.shown(encoded(name, phase), 3) for name, phase in (("a", "Pending"), ("b", "Running"))]

    kept = table_of(pods, items, 3, row_of=listed.row)
    again = table_of(pods, items, 3, row_of=listed.row)

    assert kept == again == table_of(pods, items, 3)
    assert [row["cells"][:3] for row in kept["rows"]] == [
        ["a", "Pending", "<none>"],
        ["b", "Running", "node-1"],
    ]


def test_a_page_decoded_ahead_is_shown_from_the_store_and_nothing_is_decoded_when_nothing_is_kept() -> None:
    listed, keeping_none = ListedObjects(), ListedObjects(kept=0)
    listed.decode_ahead([encoded("a"), encoded("b")], [4, 5])
    keeping_none.decode_ahead([encoded("a")], [4])

    assert len(listed) == 2
    assert listed.shown(encoded("b"), 5) is listed.shown(encoded("b"), 5)
    assert len(keeping_none) == 0
