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
    first = listed.shown("Pod", encoded("a"), 7)

    assert listed.shown("Pod", encoded("a"), 7) is first
    assert first["metadata"]["resourceVersion"] == "7"
    assert first == {**orjson.loads(encoded("a")), "metadata": {**first["metadata"], "resourceVersion": "7"}}


def test_a_new_encoding_or_revision_is_decoded_afresh() -> None:
    listed = ListedObjects()
    before = listed.shown("Pod", encoded("a"), 7)

    relabelled = listed.shown("Pod", encoded("a", labels={"team": "b"}), 8)
    moved = listed.shown("Pod", encoded("a"), 9)

    assert relabelled["metadata"]["labels"] == {"team": "b"}
    assert moved["metadata"]["resourceVersion"] == "9"
    assert before["metadata"]["resourceVersion"] == "7"  # what was shown before is left as it was
    assert listed.shown("Pod", encoded("a"), 9) is moved


def test_the_least_recently_listed_go_first_and_nothing_is_kept_at_zero() -> None:
    listed = ListedObjects(kept=2)
    listed.begin("Pod")
    a = listed.shown("Pod", encoded("a"), 1)
    b = listed.shown("Pod", encoded("b"), 2)
    listed.begin("Pod")
    listed.shown("Pod", encoded("a"), 1)  # a is recent again
    listed.shown("Pod", encoded("c"), 3)

    assert len(listed) == 2
    assert listed.shown("Pod", encoded("a"), 1) is a
    listed.begin("Pod")
    assert listed.shown("Pod", encoded("b"), 2) is not b  # b went first: decoded afresh
    keeping_none = ListedObjects(kept=0)
    assert keeping_none.shown("Pod", encoded("a"), 1) is not keeping_none.shown("Pod", encoded("a"), 1)


def test_a_row_is_worked_out_once_per_object_shown_and_each_time_for_others() -> None:
    listed = ListedObjects()
    obj = listed.shown("Pod", encoded("a", phase="Running"), 1)
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
    items = [
        listed.shown("Pod", encoded(name, phase), 3) for name, phase in (("a", "Pending"), ("b", "Running"))
    ]

    kept = table_of(pods, items, 3, row_of=listed.row)
    again = table_of(pods, items, 3, row_of=listed.row)

    assert kept == again == table_of(pods, items, 3)
    assert [row["cells"][:3] for row in kept["rows"]] == [
        ["a", "Pending", "<none>"],
        ["b", "Running", "node-1"],
    ]


def test_a_page_decoded_ahead_is_shown_from_the_store_and_nothing_is_decoded_when_nothing_is_kept() -> None:
    listed, keeping_none = ListedObjects(), ListedObjects(kept=0)
    listed.decode_ahead("Pod", [encoded("a"), encoded("b")], [4, 5])
    keeping_none.decode_ahead("Pod", [encoded("a")], [4])

    assert len(listed) == 2
    assert listed.shown("Pod", encoded("b"), 5) is listed.shown("Pod", encoded("b"), 5)
    assert len(keeping_none) == 0


def test_each_kind_has_its_own_room() -> None:
    listed = ListedObjects(kept=2)
    pods = [listed.shown("Pod", encoded(name), 1) for name in "ab"]
    listed.shown("Node", encoded("n1"), 1)
    listed.shown("Node", encoded("n2"), 1)

    assert len(listed) == 4
    assert listed.full("Pod")
    assert listed.full("Node")
    assert not listed.full("Event")
    assert [listed.shown("Pod", encoded(name), 1) for name in "ab"] == pods
    assert all(
        again is first
        for again, first in zip([listed.shown("Pod", encoded(n), 1) for n in "ab"], pods, strict=True)
    )


def test_a_list_longer_than_the_room_keeps_its_first_objects_for_the_next_list() -> None:
    listed = ListedObjects(kept=3)
    names = "abcde"

    listed.begin("Pod")
    first = {name: listed.shown("Pod", encoded(name), 1) for name in names}
    listed.begin("Pod")
    second = {name: listed.shown("Pod", encoded(name), 1) for name in names}

    # Least recently listed alone would have pushed out each object before the next list met it again.
    assert [second[n] is first[n] for n in names] == [True, True, True, False, False]
    assert len(listed) == 3


def test_objects_no_list_meets_any_more_make_room_for_those_one_does() -> None:
    listed = ListedObjects(kept=2)
    listed.begin("Pod")
    listed.shown("Pod", encoded("old-1"), 1)
    listed.shown("Pod", encoded("old-2"), 1)
    listed.begin("Pod")
    a = listed.shown("Pod", encoded("a"), 2)
    b = listed.shown("Pod", encoded("b"), 2)

    listed.begin("Pod")
    assert listed.shown("Pod", encoded("a"), 2) is a
    assert listed.shown("Pod", encoded("b"), 2) is b
