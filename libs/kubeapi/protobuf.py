"""Request bodies in the API server's protobuf encoding (`application/vnd.kubernetes.protobuf`), read into the
JSON form every other path takes.

kubectl's typed clients (`kubectl create namespace|job|priorityclass`, `kubectl drain`'s evictions) send
built-in kinds this way. A body is the magic `k8s\\x00` and a `runtime.Unknown` whose `raw` is the object's
message. Go's marshalling writes every field that is not a pointer, set or not: a field left at its zero value
here is a field the client did not set, and is left out as JSON's `omitempty` leaves it out, except the
pointer fields (`KEEP`), whose zero is a value the client chose. Only the messages of the kinds kubectl sends
this way are known (field numbers from kubernetes/api's generated.proto); a field this reader does not know
that carries a value refuses the body, naming the field, rather than losing what the client asked for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

STRING, INT, BOOL, TIME, LABELS, QUANTITIES, IGNORED = (
    "string",
    "int",
    "bool",
    "time",
    "labels",
    "q",
    "ignored",
)
"""Field types besides messages: LABELS is a map of strings, QUANTITIES a map of resource.Quantity, IGNORED a
part the API server drops from a write anyway (an object's status)."""

Field = tuple[str, str, bool]
"""(JSON name, type or message name, repeated)."""


def _fields(**numbered: str) -> dict[int, Field]:
    """`name="3:string"` or `"6:Container[]"`: field number, type, `[]` when repeated."""
    found: dict[int, Field] = {}
    for name, spec in numbered.items():
        number, kind = spec.split(":")
        found[int(number)] = (name.rstrip("_"), kind.removesuffix("[]"), kind.endswith("[]"))
    return found


MESSAGES: dict[str, dict[int, Field]] = {
    "Unknown": _fields(
        typeMeta="1:TypeMeta", raw="2:bytes", contentEncoding="3:string", contentType="4:string"
    ),
    "TypeMeta": _fields(apiVersion="1:string", kind="2:string"),
    "ObjectMeta": _fields(
        name="1:string",
        generateName="2:string",
        namespace="3:string",
        selfLink="4:string",
        uid="5:string",
        resourceVersion="6:string",
        generation="7:int",
        creationTimestamp="8:time",
        deletionTimestamp="9:time",
        deletionGracePeriodSeconds="10:int",
        labels="11:labels",
        annotations="12:labels",
        ownerReferences="13:OwnerReference[]",
        finalizers="14:string[]",
    ),
    "OwnerReference": _fields(
        apiVersion="5:string",
        kind="1:string",
        name="3:string",
        uid="4:string",
        controller="6:bool",
        blockOwnerDeletion="7:bool",
    ),
    "LabelSelector": _fields(matchLabels="1:labels", matchExpressions="2:LabelSelectorRequirement[]"),
    "LabelSelectorRequirement": _fields(key="1:string", operator="2:string", values="3:string[]"),
    "DeleteOptions": _fields(
        gracePeriodSeconds="1:int",
        preconditions="2:Preconditions",
        orphanDependents="3:bool",
        propagationPolicy="4:string",
        dryRun="5:string[]",
    ),
    "Preconditions": _fields(uid="1:string", resourceVersion="2:string"),
    "Namespace": _fields(metadata="1:ObjectMeta", spec="2:NamespaceSpec", status="3:ignored"),
    "NamespaceSpec": _fields(finalizers="1:string[]"),
    "Pod": _fields(metadata="1:ObjectMeta", spec="2:PodSpec", status="3:ignored"),
    "PodTemplateSpec": _fields(metadata="1:ObjectMeta", spec="2:PodSpec"),
    "PodSpec": _fields(
        initContainers="20:Container[]",
        containers="2:Container[]",
        restartPolicy="3:string",
        terminationGracePeriodSeconds="4:int",
        activeDeadlineSeconds="5:int",
        dnsPolicy="6:string",
        nodeSelector="7:labels",
        serviceAccountName="8:string",
        serviceAccount="9:string",
        automountServiceAccountToken="21:bool",
        nodeName="10:string",
        hostNetwork="11:bool",
        hostPID="12:bool",
        hostIPC="13:bool",
        hostname="16:string",
        subdomain="17:string",
        schedulerName="19:string",
        tolerations="22:Toleration[]",
        priorityClassName="24:string",
        priority="25:int",
        runtimeClassName="29:string",
        enableServiceLinks="30:bool",
        preemptionPolicy="31:string",
        resourceClaims="39:PodResourceClaim[]",
        schedulingGroup="43:PodSchedulingGroup",
    ),
    "Container": _fields(
        name="1:string",
        image="2:string",
        command="3:string[]",
        args="4:string[]",
        workingDir="5:string",
        ports="6:ContainerPort[]",
        env="7:EnvVar[]",
        resources="8:ResourceRequirements",
        terminationMessagePath="13:string",
        terminationMessagePolicy="20:string",
        imagePullPolicy="14:string",
        stdin="16:bool",
        stdinOnce="17:bool",
        tty="18:bool",
    ),
    "ContainerPort": _fields(
        name="1:string", hostPort="2:int", containerPort="3:int", protocol="4:string", hostIP="5:string"
    ),
    "EnvVar": _fields(name="1:string", value="2:string"),
    "ResourceRequirements": _fields(limits="1:q", requests="2:q", claims="3:ContainerClaim[]"),
    "ContainerClaim": _fields(name="1:string", request="2:string"),
    "Toleration": _fields(
        key="1:string", operator="2:string", value="3:string", effect="4:string", tolerationSeconds="5:int"
    ),
    "PodResourceClaim": _fields(
        name="1:string", resourceClaimName="3:string", resourceClaimTemplateName="4:string"
    ),
    "PodSchedulingGroup": _fields(podGroupName="1:string"),
    "Job": _fields(metadata="1:ObjectMeta", spec="2:JobSpec", status="3:ignored"),
    "JobSpec": _fields(
        parallelism="1:int",
        completions="2:int",
        activeDeadlineSeconds="3:int",
        podFailurePolicy="11:PodFailurePolicy",
        backoffLimit="7:int",
        backoffLimitPerIndex="12:int",
        maxFailedIndexes="13:int",
        selector="4:LabelSelector",
        manualSelector="5:bool",
        template="6:PodTemplateSpec",
        ttlSecondsAfterFinished="8:int",
        completionMode="9:string",
        suspend="10:bool",
        podReplacementPolicy="14:string",
        managedBy="15:string",
    ),
    "PodFailurePolicy": _fields(rules="1:PodFailurePolicyRule[]"),
    "PodFailurePolicyRule": _fields(
        action="1:string", onExitCodes="2:OnExitCodes", onPodConditions="3:OnPodConditions[]"
    ),
    "OnExitCodes": _fields(containerName="1:string", operator="2:string", values="3:int[]"),
    "OnPodConditions": _fields(type_="1:string", status="2:string"),
    "PriorityClass": _fields(
        metadata="1:ObjectMeta",
        value="2:int",
        globalDefault="3:bool",
        description="4:string",
        preemptionPolicy="5:string",
    ),
    "Eviction": _fields(metadata="1:ObjectMeta", deleteOptions="2:DeleteOptions"),
}

KEEP: dict[str, frozenset[str]] = {
    "ObjectMeta": frozenset({"deletionGracePeriodSeconds"}),
    "OwnerReference": frozenset({"controller", "blockOwnerDeletion"}),
    "DeleteOptions": frozenset({"gracePeriodSeconds", "orphanDependents", "propagationPolicy"}),
    "Preconditions": frozenset({"uid", "resourceVersion"}),
    "PodSpec": frozenset(
        {
            "terminationGracePeriodSeconds",
            "activeDeadlineSeconds",
            "automountServiceAccountToken",
            "priority",
            "runtimeClassName",
            "enableServiceLinks",
            "preemptionPolicy",
        }
    ),
    "Toleration": frozenset({"tolerationSeconds"}),
    "PodResourceClaim": frozenset({"resourceClaimName", "resourceClaimTemplateName"}),
    "JobSpec": frozenset(
        {
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "backoffLimit",
            "backoffLimitPerIndex",
            "maxFailedIndexes",
            "manualSelector",
            "ttlSecondsAfterFinished",
            "completionMode",
            "suspend",
            "podReplacementPolicy",
            "managedBy",
        }
    ),
    "OnExitCodes": frozenset({"containerName"}),
    "PriorityClass": frozenset({"value", "preemptionPolicy"}),
}
"""Pointer fields (and `PriorityClass.value`, which JSON never omits): their zero is kept."""

KINDS = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "Pod"): "Pod",
    ("batch/v1", "Job"): "Job",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("policy/v1", "Eviction"): "Eviction",
}
"""The kinds read from protobuf, by (apiVersion, kind) as the envelope names them."""


class ProtobufError(ValueError):
    """A body that is not the API server's protobuf, or holds what this reader cannot read faithfully."""


def decode_object(raw: bytes) -> dict[str, Any]:
    """The object a protobuf body carries, as its JSON form (with apiVersion and kind)."""
    if not raw.startswith(MAGIC):
        raise ProtobufError("provided data does not have the protobuf prefix")
    envelope = _message(raw[len(MAGIC) :], "Unknown")
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = str(type_meta.get("apiVersion") or ""), str(type_meta.get("kind") or "")
    message = KINDS.get((api_version, kind))
    if message is None:
        raise ProtobufError(f"no kind {kind!r} is registered for version {api_version!r} in protobuf")
    if envelope.get("contentEncoding"):
        raise ProtobufError(f"content encoding {envelope['contentEncoding']!r} is not supported")
    body = _message(envelope.get("raw") or b"", message)
    return {"apiVersion": api_version, "kind": kind, **body}


def decode_delete_options(raw: bytes) -> dict[str, Any]:
    """DeleteOptions sent as protobuf (any of the versions its envelope may name)."""
    if not raw.startswith(MAGIC):
        raise ProtobufError("provided data does not have the protobuf prefix")
    envelope = _message(raw[len(MAGIC) :], "Unknown")
    kind = (envelope.get("typeMeta") or {}).get("kind")
    if kind != "DeleteOptions":
        raise ProtobufError(f"expected DeleteOptions, got {kind!r}")
    return _message(envelope.get("raw") or b"", "DeleteOptions")


def _message(data: bytes, name: str) -> dict[str, Any]:
    fields = MESSAGES[name]
    keep = KEEP.get(name, frozenset())
    found: dict[str, Any] = {}
    for number, wire, value in _wire_fields(data, name):
        field = fields.get(number)
        if field is None:
            if _is_zero(wire, value):
                continue
            raise ProtobufError(f"field {number} of {name} is not read by this server (send JSON instead)")
        json_name, kind, repeated = field
        if kind == IGNORED:
            continue
        if kind == "int" and repeated and wire == 2:  # a packed repeated integer
            found.setdefault(json_name, []).extend(_signed(v) for v in _varints(_as_bytes(value, name)))
            continue
        decoded = _value(kind, wire, value, f"{name}.{json_name}")
        if repeated:
            found.setdefault(json_name, []).append(decoded)
        elif kind in (LABELS, QUANTITIES):
            found.setdefault(json_name, {}).update(decoded)
        else:
            found[json_name] = decoded
    return {key: value for key, value in found.items() if key in keep or not _empty(value)}


def _value(kind: str, wire: int, value: int | bytes, where: str) -> Any:
    if kind == INT:
        return _signed(_as_int(value, where))
    if kind == BOOL:
        return bool(_as_int(value, where))
    data = _as_bytes(value, where)
    if kind == STRING:
        return data.decode()
    if kind == "bytes":
        return data
    if kind == TIME:
        seconds = _signed(_message_ints(data).get(1, 0))
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if data else None
    if kind in (LABELS, QUANTITIES):
        return dict([_entry(data, quantity=kind == QUANTITIES)])
    return _message(data, kind)


def _entry(data: bytes, *, quantity: bool) -> tuple[str, str]:
    """One map entry (key 1, value 2); a Quantity is a message holding its string in field 1."""
    key, value = "", ""
    for number, _, field in _wire_fields(data, "map entry"):
        text = _as_bytes(field, "map entry")
        if number == 1:
            key = text.decode()
        elif number == 2:
            value = _quantity(text) if quantity else text.decode()
    return key, value


def _quantity(data: bytes) -> str:
    for number, _, field in _wire_fields(data, "Quantity"):
        if number == 1:
            return _as_bytes(field, "Quantity").decode()
    return "0"


def _message_ints(data: bytes) -> dict[int, int]:
    return {number: value for number, _, value in _wire_fields(data, "Time") if isinstance(value, int)}


def _wire_fields(data: bytes, name: str) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field, in order."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position, name)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position, name)
            yield number, wire, value
        elif wire == 2:
            length, position = _varint(data, position, name)
            if position + length > len(data):
                raise ProtobufError(f"{name}: a field runs past the end of the data")
            yield number, wire, data[position : position + length]
            position += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if position + size > len(data):
                raise ProtobufError(f"{name}: a field runs past the end of the data")
            yield number, wire, int.from_bytes(data[position : position + size], "little")
            position += size
        else:
            raise ProtobufError(f"{name}: wire type {wire} of field {number} is not supported")


def _varint(data: bytes, position: int, name: str) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise ProtobufError(f"{name}: a varint is cut short")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _varints(data: bytes) -> Iterator[int]:
    position = 0
    while position < len(data):
        value, position = _varint(data, position, "packed integers")
        yield value


def _signed(value: int) -> int:
    """A varint as Go's int32 and int64 write it (negatives in two's complement over 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _as_int(value: int | bytes, where: str) -> int:
    if not isinstance(value, int):
        raise ProtobufError(f"{where}: expected a number")
    return value


def _as_bytes(value: int | bytes, where: str) -> bytes:
    if not isinstance(value, bytes):
        raise ProtobufError(f"{where}: expected a length-delimited field")
    return value


def _is_zero(wire: int, value: int | bytes) -> bool:
    return value == 0 if wire != 2 else len(value) == 0 if isinstance(value, bytes) else False


def _empty(value: Any) -> bool:
    return value is None or value in ("", 0, False) or (isinstance(value, dict | list) and not value)
