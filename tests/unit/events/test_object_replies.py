"""Lists and change pages are written and read with orjson: the same JSON pydantic writes, the same models
pydantic reads."""

from __future__ import annotations

import json

from libs.events.rpc import (
    Change,
    ChangesReply,
    GetReply,
    decode_changes_reply,
    decode_get_reply,
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
