"""Lists and change pages are written and read with orjson: the same JSON pydantic writes, the same models
pydantic reads."""

from __future__ import annotations

import json

import orjson

from libs.events.rpc import (
    Change,
    ChangesReply,
    GetReply,
    decode_changes_reply,
    decode_framed,
    decode_get_reply,
    encode_framed,
    encode_objects,
)

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ml", "labels": {"app": "x"}},
    "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
}


def test_a_list_page_is_the_json_pydantic_writes_and_reads_back_equal():
    reply = GetReply(
        items=[POD, {**POD, "metadata": {"name": "q"}}], continue_token="t", revision=9, item_revisions=[7, 9]
    )

    raw = encode_objects(reply)

    assert json.loads(raw) == json.loads(reply.model_dump_json())
    assert decode_get_reply(raw) == GetReply.model_validate_json(raw)
    assert decode_get_reply(raw) == reply


def test_a_change_page_is_the_json_pydantic_writes_and_reads_back_equal():
    reply = ChangesReply(
        revision=12,
        compacted=3,
        changes=[
            Change(type="ADDED", revision=11, created_revision=11, object=POD),
            Change(type="DELETED", revision=12, object=POD),
        ],
        partial_uid=None,
    )

    raw = encode_objects(reply)

    assert json.loads(raw) == json.loads(reply.model_dump_json())
    decoded = decode_changes_reply(raw)
    assert decoded == reply
    assert isinstance(decoded.changes[0], Change)


def test_what_orjson_cannot_write_is_written_by_pydantic():
    reply = GetReply(items=[{"metadata": {1: "integer key"}}])

    assert json.loads(encode_objects(reply)) == json.loads(reply.model_dump_json())


def test_a_page_of_items_already_encoded_is_written_as_the_objects_would_be():
    as_objects = GetReply(items=[POD], revision=3, item_revisions=[3])
    as_encoded = GetReply.model_construct(items=[orjson.dumps(POD)], revision=3, item_revisions=[3])

    assert json.loads(encode_objects(as_encoded)) == json.loads(encode_objects(as_objects))


def test_a_framed_page_carries_each_item_as_encoded_on_a_line_of_its_own():
    multiline = {**POD, "metadata": {"name": "q", "annotations": {"note": "two\nlines"}}}
    reply = GetReply.model_construct(
        items=[orjson.dumps(POD), multiline], continue_token="t", revision=9, item_revisions=[7, 9]
    )

    page = decode_framed(encode_framed(reply))

    assert page.items == [orjson.dumps(POD), orjson.dumps(multiline)]
    assert [orjson.loads(item) for item in page.items] == [POD, multiline]
    assert (page.item_revisions, page.continue_token, page.revision) == ([7, 9], "t", 9)


def test_an_empty_page_and_a_page_written_whole_are_read_as_framed_ones():
    empty = decode_framed(encode_framed(GetReply(items=[], revision=4)))
    whole = decode_framed(encode_objects(GetReply(items=[POD], revision=5, item_revisions=[5])))

    assert (empty.items, empty.revision, empty.continue_token) == ([], 4, None)
    assert [orjson.loads(item) for item in whole.items] == [POD]
    assert (whole.item_revisions, whole.revision) == ([5], 5)
