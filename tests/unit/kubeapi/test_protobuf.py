"""Protobuf request bodies as kubectl's typed clients write them: Go writes every non-pointer field, set or
not, so the reader must tell a zero the client chose from a field it left alone, and refuse what it cannot
read rather than drop it."""

from __future__ import annotations

import pytest

from libs.kubeapi.protobuf import MAGIC, ProtobufError, decode_delete_options, decode_object


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negatives as Go writes int32 and int64: ten bytes of two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def number(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def chunk(field: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return varint(field << 3 | 2) + varint(len(raw)) + raw


def entry(field: int, key: str, value: bytes | str) -> bytes:
    return chunk(field, chunk(1, key) + chunk(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + chunk(1, chunk(1, api_version) + chunk(2, kind)) + chunk(2, raw)


def metadata(name: str, namespace: str = "") -> bytes:
    # As Go writes an ObjectMeta with only a name: every string, the generation and a zero creation time.
    return chunk(
        1,
        chunk(1, name)
        + chunk(2, "")
        + chunk(3, namespace)
        + chunk(4, "")
        + chunk(5, "")
        + chunk(6, "")
        + number(7, 0)
        + chunk(8, b"")
        + entry(11, "app", "train"),
    )


def test_a_namespace_reads_as_its_json_with_unset_fields_left_out() -> None:
    body = envelope("v1", "Namespace", metadata("ml") + chunk(2, b"") + chunk(3, chunk(1, "")))

    assert decode_object(body) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ml", "labels": {"app": "train"}},
    }


def test_a_job_keeps_the_zeros_its_pointer_fields_were_given_and_reads_its_pod_template() -> None:
    container = (
        chunk(1, "main")
        + chunk(2, "busybox")
        + chunk(3, "echo")
        + chunk(3, "hi")
        + chunk(5, "")
        + chunk(8, entry(2, "nvidia.com/gpu", chunk(1, "8")) + entry(1, "cpu", chunk(1, "4")))
        + chunk(13, "")
        + number(16, 0)
        + number(18, 0)
    )
    pod_spec = chunk(2, container) + chunk(3, "Never") + number(25, 0) + chunk(43, chunk(1, "workers"))
    job_spec = (
        number(1, 0)
        + number(7, 3)
        + chunk(6, chunk(1, b"") + chunk(2, pod_spec))
        + number(10, 0)
        + chunk(
            11, chunk(1, chunk(1, "FailJob") + chunk(2, chunk(2, "In") + chunk(3, varint(42) + varint(7))))
        )
    )
    body = envelope("batch/v1", "Job", metadata("train", "ml") + chunk(2, job_spec) + chunk(3, number(4, 1)))

    job = decode_object(body)

    assert job["spec"] == {
        "parallelism": 0,
        "backoffLimit": 3,
        "suspend": False,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["echo", "hi"],
                        "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"cpu": "4"}},
                    }
                ],
                "restartPolicy": "Never",
                "priority": 0,
                "schedulingGroup": {"podGroupName": "workers"},
            }
        },
        "podFailurePolicy": {
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42, 7]}}]
        },
    }
    assert "status" not in job  # a write drops it anyway


def test_negative_integers_and_a_priority_class_value_of_zero() -> None:
    zero = envelope("scheduling.k8s.io/v1", "PriorityClass", metadata("low") + number(2, 0) + chunk(4, ""))
    negative = envelope("scheduling.k8s.io/v1", "PriorityClass", metadata("below") + number(2, -5))

    assert decode_object(zero)["value"] == 0
    assert decode_object(negative)["value"] == -5


def test_delete_options_inside_an_eviction_and_on_their_own() -> None:
    options = number(1, 0) + chunk(2, chunk(1, "uid-1")) + chunk(4, "Foreground")
    eviction = decode_object(envelope("policy/v1", "Eviction", metadata("p", "ml") + chunk(2, options)))
    alone = decode_delete_options(envelope("meta.k8s.io/v1", "DeleteOptions", options))

    expected = {"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-1"}, "propagationPolicy": "Foreground"}
    assert eviction["deleteOptions"] == alone == expected


def test_a_field_this_reader_does_not_know_is_ignored_when_unset_and_refused_when_set() -> None:
    unset = envelope("v1", "Pod", metadata("p", "ml") + chunk(2, chunk(18, b"")))  # affinity: nil
    affinity = chunk(1, chunk(1, b"\x0a\x00"))
    refused = envelope("v1", "Pod", metadata("p", "ml") + chunk(2, chunk(18, affinity)))

    assert decode_object(unset)["metadata"]["name"] == "p"
    with pytest.raises(ProtobufError, match="field 18 of PodSpec is not read by this server"):
        decode_object(refused)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"kind": "Pod"}', "does not have the protobuf prefix"),
        (envelope("apps/v1", "Deployment", b""), "no kind 'Deployment' is registered for version 'apps/v1'"),
        (envelope("v1", "Pod", metadata("p"))[:-3], "runs past the end"),
        (MAGIC + b"\x0a\xff", "varint is cut short"),
        (envelope("v1", "Pod", number(1, 5)), "PodSpec|ObjectMeta|metadata"),
    ],
)
def test_what_is_not_a_body_it_can_read_is_refused_with_why(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        decode_object(body)
