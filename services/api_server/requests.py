"""What a request asks: its query parameters, its body as an object, the URL's kind and namespace on it."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import yaml
from aiohttp import web

from libs.api.errors import FieldError, FieldPath, forbidden, invalid, not_supported
from libs.api.limits import LimitExceeded, check_document_shape
from libs.events.rpc import Propagation
from libs.kubeapi import protobuf, status
from libs.kubeapi.patches import (
    YAML_LOADER,
    media_type,
)
from libs.kubeapi.resources import Resource
from libs.kubeapi.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    check_fields,
    parse_field_selector,
    parse_label_selector,
)
from services.api_server.answers import Refused
from services.api_server.backend import FieldValidation
from services.api_server.routes import Target

MAX_BODY = 3 * 1024 * 1024
BODY_TYPES = ("application/json", "application/yaml", protobuf.MEDIA_TYPE)
"""What a body may be written in (protobuf for the built-in kinds kubectl's typed clients send: see
libs/kubeapi/protobuf.py)."""
"""The API server's request size limit (3 MiB, as etcd's default object limit)."""


def flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def limit_param(value: str | None) -> int | None:
    limit = int_param("limit", value)
    return limit if limit is not None and limit > 0 else None


def int_param(name: str, value: str | None) -> int | None:
    """An integer query parameter as the API server decodes it (`strconv.ParseInt`, 64 bits); None when
    absent or empty."""
    if value is None or value == "":
        return None
    if not re.fullmatch(r"[+-]?[0-9]+", value):
        raise Refused(status.bad_request(f"strconv.ParseInt: parsing {json.dumps(value)}: invalid syntax"))
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise Refused(
            status.bad_request(f"strconv.ParseInt: parsing {json.dumps(value)}: value out of range")
        )
    return number


def selectors(request: web.Request, resource: Resource) -> tuple[LabelSelector | None, FieldSelector | None]:
    try:
        labels = (
            parse_label_selector(request.query["labelSelector"])
            if request.query.get("labelSelector")
            else None
        )
        fields = None
        if request.query.get("fieldSelector"):
            parsed = parse_field_selector(request.query["fieldSelector"])
            fields = check_fields(parsed, resource.group, resource.version, resource.kind)
    except SelectorError as error:
        raise Refused(status.bad_request(str(error))) from None
    return labels, fields


NOT_OLDER_THAN = "NotOlderThan"


def send_initial_events(request: web.Request) -> bool | None:
    """A watch's `sendInitialEvents` (None when not given), checked with its `resourceVersionMatch` as the
    API server checks a watch-list request; refused with upstream's 422 otherwise."""
    given = request.query.get("sendInitialEvents")
    send = None if given is None else flag(given)
    match = request.query.get("resourceVersionMatch") or ""
    path = FieldPath("resourceVersionMatch")
    errors: list[FieldError] = []
    if send is not None and match != NOT_OLDER_THAN:
        detail = f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"
        errors.append(forbidden(path, detail))
    if match:
        if send is None:
            detail = "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
            errors.append(forbidden(path, detail))
        if match != NOT_OLDER_THAN:
            errors.append(not_supported(path, match, [NOT_OLDER_THAN]))
        if request.query.get("continue"):
            errors.append(forbidden(path, "resourceVersionMatch is forbidden when continue is provided"))
    _refuse_list_options(errors)
    return send


def check_list_options(request: web.Request) -> None:
    """A list (not a watch) asking for initial events is refused, as the API server refuses it."""
    if "sendInitialEvents" in request.query:
        detail = "sendInitialEvents is forbidden for list"
        _refuse_list_options([forbidden(FieldPath("sendInitialEvents"), detail)])


def _refuse_list_options(errors: list[FieldError]) -> None:
    if errors:
        raise Refused(status.invalid("ListOptions.meta.k8s.io", "", errors))


def dry_run(request: web.Request) -> bool:
    return request.query.get("dryRun") == "All"


def field_validation(request: web.Request) -> FieldValidation:
    """The request's `fieldValidation`; Warn when not given, as the API server's default (kubectl sends
    Strict unless told `--validate=warn|false`)."""
    value = request.query.get("fieldValidation") or "Warn"
    if value not in ("Strict", "Warn", "Ignore"):
        raise Refused(status.bad_request(f'fieldValidation: Unsupported value: "{value}"'))
    return value  # type: ignore[return-value]


async def read_body(request: web.Request) -> bytes:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise Refused(status.request_entity_too_large(f"limit is {MAX_BODY}"))
    raw = await request.read()
    if len(raw) > MAX_BODY:
        raise Refused(status.request_entity_too_large(f"limit is {MAX_BODY}"))
    return raw


async def read_object(request: web.Request) -> dict[str, Any]:
    """The request's object, JSON or YAML; refused as the API server refuses what it cannot decode."""
    raw = await read_body(request)
    # No Content-Type is JSON, as the API server negotiates it (the kubernetes client sends none on create).
    media = media_type(request.headers.get("Content-Type") or "application/json").lower()
    try:
        if media in ("application/yaml", "application/apply-patch+yaml"):
            loaded = yaml.load(raw.decode(), Loader=YAML_LOADER)
        elif media.startswith("application/") and media.endswith("json"):
            loaded = json.loads(raw)
        elif media == protobuf.MEDIA_TYPE:
            loaded = protobuf.decode_object(raw)
        else:
            raise Refused(status.unsupported_media_type(BODY_TYPES))
    except (ValueError, yaml.YAMLError, UnicodeDecodeError) as error:
        message = str(error).splitlines()[0]
        raise Refused(status.bad_request(f"the object provided is unrecognized: {message}")) from None
    except RecursionError:
        raise Refused(status.bad_request("the object provided is unrecognized: exceeded max depth")) from None
    if not isinstance(loaded, dict):
        raise Refused(status.bad_request("the object provided is unrecognized"))
    return loaded


def _writable(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a write hands admission: no status (its controllers own it; a Node's is its agent's report)."""
    if manifest.get("kind") == "Node":
        return manifest
    return {key: value for key, value in manifest.items() if key != "status"}


def in_target(manifest: dict[str, Any], target: Target) -> dict[str, Any]:
    """The body with the URL's kind and namespace: a body naming another namespace is refused, as upstream."""
    resource = target.resource
    try:
        check_document_shape(manifest, 0)  # admission's limits, before anything walks the object
    except LimitExceeded as error:
        raise Refused(status.bad_request(str(error))) from None
    manifest = _scrubbed(manifest)
    if manifest.get("kind") not in (None, resource.kind) or manifest.get("apiVersion") not in (
        None,
        resource.api_version,
    ):
        message = (
            f"the API version in the data ({manifest.get('apiVersion')}) does not match the expected API "
            f"version ({resource.api_version})"
        )
        raise Refused(status.bad_request(message))
    metadata = dict(metadata_of(manifest, resource))
    if resource.namespaced and target.namespace:
        given = metadata.get("namespace")
        if given not in (None, "", target.namespace):
            raise Refused(
                status.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            )
        metadata["namespace"] = target.namespace
    return _writable(
        {**manifest, "kind": resource.kind, "apiVersion": resource.api_version, "metadata": metadata}
    )


def metadata_of(manifest: dict[str, Any], resource: Resource) -> dict[str, Any]:
    """The object's metadata; a body whose metadata is not an object is refused as the decoder refuses it."""
    metadata = manifest.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        kind, version = resource.kind, resource.version
        message = (
            f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot unmarshal '
            f"{_go_kind(metadata)} into Go struct field {kind}.metadata of type v1.ObjectMeta"
        )
        raise Refused(status.bad_request(message))
    return metadata


def _go_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, int | float) else "string"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrubbed(value: Any) -> Any:
    """Strings with lone UTF-16 surrogates (a `\\ud800` escape) made valid, as Go's decoder makes them:
    each becomes U+FFFD. Most documents have none: orjson encodes them in C (and refuses a surrogate)."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return _scrubbed_walk(value)
    return value


def _scrubbed_walk(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrubbed_walk(key): _scrubbed_walk(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed_walk(item) for item in value]
    return value


def check_name(manifest: dict[str, Any], name: str) -> None:
    """An update or patch keeps the object's name (`checkName`): anything else is a 400, never a retry."""
    given = (manifest.get("metadata") or {}).get("name")
    if given != name:
        message = f"the name of the object ({given or ''}) does not match the name on the URL ({name})"
        raise Refused(status.bad_request(message))


def field_manager(request: web.Request) -> str:
    """The write's field manager: `fieldManager`, else the client's name from its User-Agent, as upstream."""
    given = request.query.get("fieldManager")
    if given:
        return given
    agent = request.headers.get("User-Agent") or "unknown"
    return agent.split("/")[0][:128] or "unknown"


def now_rfc3339() -> str:
    """Now to the second, as metadata times are written (formatted once a second: every write asks)."""
    second = int(time.time())
    if second != _formatted[0]:
        _formatted[:] = [second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")]
    return str(_formatted[1])


_formatted: list[Any] = [None, ""]


PROPAGATIONS = ("Foreground", "Background", "Orphan")


@dataclass(frozen=True)
class DeleteOptions:
    """A delete's options (`meta/v1 DeleteOptions`), from its query and its body, as upstream reads them."""

    propagation: Propagation | None = None
    grace_seconds: int | None = None
    dry_run: bool = False
    uid: str | None = None
    resource_version: str | None = None


async def delete_options(request: web.Request) -> DeleteOptions:
    """The query's options, then the body's over them; refused in the API server's words when invalid."""
    query = request.query
    given: dict[str, Any] = {
        "propagationPolicy": query.get("propagationPolicy") or None,
        "gracePeriodSeconds": int_param("gracePeriodSeconds", query.get("gracePeriodSeconds")),
        "dryRun": query.getall("dryRun", []),
    }
    if "orphanDependents" in query:
        given["orphanDependents"] = flag(query.get("orphanDependents"))
    raw = await read_body(request)
    if raw.strip():
        try:
            if media_type(request.headers.get("Content-Type")).lower() == protobuf.MEDIA_TYPE:
                body = protobuf.decode_delete_options(raw)
            else:
                body = json.loads(raw)
        except ValueError as error:
            raise Refused(status.bad_request(f"invalid DeleteOptions: {error}")) from None
        if not isinstance(body, dict):
            raise Refused(status.bad_request("invalid DeleteOptions: not an object"))
        given |= {k: v for k, v in body.items() if k not in ("kind", "apiVersion") and v is not None}
    return _checked_delete_options(given)


def eviction_options(eviction: dict[str, Any]) -> DeleteOptions:
    """An Eviction's `deleteOptions`, checked as a delete's."""
    given = eviction.get("deleteOptions") or {}
    if not isinstance(given, dict):
        raise Refused(status.bad_request("invalid DeleteOptions: not an object"))
    return _checked_delete_options({k: v for k, v in given.items() if k not in ("kind", "apiVersion")})


def _checked_delete_options(given: dict[str, Any]) -> DeleteOptions:
    policy, orphan = given.get("propagationPolicy"), given.get("orphanDependents")
    errors: list[FieldError] = []
    if orphan is not None and policy is not None:
        message = "orphanDependents and deletionPropagation cannot be both set"
        errors.append(invalid(FieldPath("propagationPolicy"), policy, message))
    if policy is not None and policy not in PROPAGATIONS:
        errors.append(not_supported(FieldPath("propagationPolicy"), policy, [*PROPAGATIONS, "nil"]))
    dry = given.get("dryRun") or []
    for position, value in enumerate(dry if isinstance(dry, list) else [dry]):
        if value != "All":
            errors.append(not_supported(FieldPath("dryRun").index(position), value, ["All"]))
    grace = given.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        errors.append(invalid(FieldPath("gracePeriodSeconds"), grace, "must be an integer"))
    if errors:
        raise Refused(status.invalid("DeleteOptions.meta.k8s.io", "", errors))
    if orphan is not None:
        policy = "Orphan" if orphan else "Background"
    preconditions = given.get("preconditions") or {}
    return DeleteOptions(
        propagation=policy,
        # Negative values are treated as 1 s on the delete path, as upstream does.
        grace_seconds=None if grace is None else 1 if grace < 0 else grace,
        dry_run=bool(dry),
        uid=preconditions.get("uid") if isinstance(preconditions, dict) else None,
        resource_version=preconditions.get("resourceVersion") if isinstance(preconditions, dict) else None,
    )
