"""The verbs on resources: get, list, watch, create, update, patch, delete, deletecollection. Every rule is
admission's; here a request becomes admission's request and its answer the API server's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import yaml
from aiohttp import web

from libs.api.limits import LimitExceeded, check_document_shape
from libs.events.rpc import ApplyReply, Change, ObjectResult
from libs.kubeapi import status
from libs.kubeapi.patches import (
    APPLY_PATCH,
    PATCH_TYPES,
    YAML_LOADER,
    ApplyConflict,
    PatchError,
    apply_configuration,
    apply_patch,
    decode_apply,
    media_type,
    record_update,
)
from libs.kubeapi.resources import RESOURCES, Resource, lookup
from libs.kubeapi.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    check_fields,
    labels_of,
    parse_field_selector,
    parse_label_selector,
    selectable_fields,
)
from libs.kubeapi.versions import as_served
from services.api_server.backend import Admission, FieldValidation
from services.api_server.feed import ChangeFeed, Expired
from services.api_server.objects import continue_token, object_list, parse_revision, read_continue, shown
from services.api_server.routes import Target
from services.api_server.tables import TABLE_MEDIA, table_of, wants_table

MAX_BODY = 3 * 1024 * 1024
"""The API server's request size limit (3 MiB, as etcd's default object limit)."""
PATCH_ATTEMPTS = 5
TABLE_OF = "podway.table_of"
"""Set on a watch's response when its events carry Tables of this resource."""
ADMISSION_PAGE = 500
"""Objects asked of admission at once for a list without a limit (its whole answer may be more than the bus
carries)."""
BOOKMARK_S = 10.0
"""How often a watch that allows bookmarks is told the current revision."""


class Refused(Exception):
    """A request answered with a `Status`."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(answer.get("message"))
        self.answer = answer


def answer(body: dict[str, Any], code: int = 200, *, content_type: str = "application/json") -> web.Response:
    try:
        encoded = orjson.dumps(body)
    except orjson.JSONEncodeError:  # a lone surrogate a client sent, quoted back in a refusal
        encoded = json.dumps(body).encode()
    return web.Response(body=encoded, status=code, headers={"Content-Type": content_type})


def refusal(answer_: dict[str, Any]) -> web.Response:
    return answer(answer_, int(answer_.get("code") or 500))


class Verbs:
    """The verbs, on admission and the change feed."""

    def __init__(self, admission: Admission, feed: ChangeFeed) -> None:
        self.admission = admission
        self.feed = feed

    # --- reads -----------------------------------------------------------------------------------

    async def get(self, request: web.Request, target: Target) -> web.StreamResponse:
        found = await self._get(target)
        if wants_table(request):
            return answer(table_of(target.resource, [found], None), content_type=TABLE_MEDIA)
        return answer(found)

    async def _get(self, target: Target) -> dict[str, Any]:
        assert target.name is not None
        namespace = target.namespace if target.resource.namespaced else ""
        found = await self.admission.get(target.resource.kind, namespace, target.name)
        if found is None:
            raise Refused(status.not_found(target.resource.plural, target.resource.group, target.name))
        manifest, revision = found
        return _typed(target.resource, shown(manifest, revision))

    async def list_objects(self, request: web.Request, target: Target) -> web.StreamResponse:
        if _flag(request.query.get("watch")):
            return await self.watch(request, target)
        labels, fields = _selectors(request, target.resource)
        limit = _limit(request.query.get("limit"))
        token, first_revision = None, None
        if raw := request.query.get("continue"):
            try:
                token, first_revision = read_continue(raw)
            except ValueError:
                raise Refused(status.bad_request("continue key is not valid: illegal base64 data")) from None
        items, next_token, revision = await self._collect(target, labels, fields, limit, token)
        revision = first_revision or revision
        token_out = continue_token(next_token, revision) if next_token else None
        if wants_table(request):
            return answer(table_of(target.resource, items, revision, token_out), content_type=TABLE_MEDIA)
        return answer(object_list(target.resource, items, revision, token_out))

    async def _collect(
        self,
        target: Target,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        limit: int | None,
        token: str | None,
    ) -> tuple[list[dict[str, Any]], str | None, int]:
        """A page of matching objects, all of them without `limit`: admission's pages are read until `limit`
        objects match (selectors filter here, and a page the bus cannot carry is split, so a page of
        admission's may hold fewer)."""
        items: list[dict[str, Any]] = []
        revision = 0
        while True:
            want = ADMISSION_PAGE if limit is None else max(limit - len(items), 1)
            reply = await self.admission.list(
                target.resource.kind,
                target.namespace,
                limit=want,
                continue_token=token,
                involved=_involved(target.resource, fields),
            )
            revision = revision or reply.revision
            for manifest, item_revision in zip(reply.items, reply.item_revisions, strict=False):
                obj = shown(manifest, item_revision)
                if _matches(obj, labels, fields):
                    items.append(obj)
            token = reply.continue_token
            if token is None or (limit is not None and len(items) >= limit):
                return items, token, revision

    async def watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        """Changes as a stream of JSON events. Everything that can fail (the initial list, the backlog since
        `resourceVersion`) is read before the answer starts, so that a failure is a `Status`, not a stream
        cut short."""
        labels, fields = _selectors(request, target.resource)
        try:
            since = parse_revision(request.query.get("resourceVersion"))
        except ValueError:
            raise Refused(status.bad_request("resourceVersion: Invalid value: not a revision")) from None
        initial = since in (None, 0) or _flag(request.query.get("sendInitialEvents"))
        bookmarks = _flag(request.query.get("allowWatchBookmarks"))
        seconds = _int_param("timeoutSeconds", request.query.get("timeoutSeconds"))
        timeout = 1800 if seconds is None else seconds
        start = since or 0
        items: list[dict[str, Any]] = []
        if initial:
            items, _, start = await self._collect(target, labels, fields, None, None)
        response = web.StreamResponse(
            headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        )
        if wants_table(request):
            response[TABLE_OF] = target.resource
        try:
            subscription = await self.feed.subscribe(start, _watched(target, labels, fields))
        except Expired as expired:
            await response.prepare(request)
            await _write_event(response, "ERROR", status.expired(expired.asked, expired.oldest))
            return response
        try:
            await response.prepare(request)
            for obj in items:
                await _write_event(response, "ADDED", _typed(target.resource, obj))
            if initial and bookmarks and since is not None:
                await _write_bookmark(response, target.resource, start, initial_end=True)
            await self._stream(response, subscription.queue, target.resource, start, timeout, bookmarks)
        finally:
            self.feed.unsubscribe(subscription)
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        queue: asyncio.Queue[Change | None],
        resource: Resource,
        since: int,
        seconds: float,
        bookmarks: bool,
    ) -> None:
        """Changes as they come: an object created after `since` is ADDED the first time this watch sees it,
        whatever happened to it before the feed read it; later changes are MODIFIED."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        announced: set[str] = set()
        while (left := deadline - loop.time()) > 0:
            try:
                change = await asyncio.wait_for(queue.get(), timeout=min(left, BOOKMARK_S))
            except TimeoutError:
                if bookmarks:
                    await _write_bookmark(response, resource, self.feed.revision)
                continue
            if change is None:
                return
            kind = change.type
            if kind != "DELETED":
                uid = str((change.object.get("metadata") or {}).get("uid"))
                kind = "ADDED" if change.created_revision > since and uid not in announced else "MODIFIED"
                announced.add(uid)
            await _write_event(response, kind, _typed(resource, shown(change.object, change.revision)))

    # --- writes ----------------------------------------------------------------------------------

    async def create(self, request: web.Request, target: Target) -> web.StreamResponse:
        if target.resource.kind == "Namespace":
            return await self._create_namespace(request, target)
        if target.resource.kind == "SelfSubjectReview":
            return _who_am_i(request)
        manifest = managed(None, _in_target(await _body(request), target), request)
        name = str((manifest.get("metadata") or {}).get("name") or "")
        if not name and (manifest.get("metadata") or {}).get("generateName"):
            raise Refused(status.bad_request("generateName is not supported by Podway; give metadata.name"))
        reply = await self.admission.apply(
            manifest, create_only=True, dry_run=_dry_run(request), field_validation=_validation(request)
        )
        result = _result(reply)
        if result.outcome == "unchanged":
            raise Refused(status.already_exists(target.resource.plural, target.resource.group, name))
        return await self._written(request, target, name, result, 201, reply)

    async def update(self, request: web.Request, target: Target) -> web.StreamResponse:
        manifest = _in_target(await _body(request), target)
        assert target.name is not None
        _check_name(manifest, target.name)
        try:
            expected = parse_revision((manifest.get("metadata") or {}).get("resourceVersion"))
        except ValueError:
            raise Refused(
                status.bad_request("metadata.resourceVersion: Invalid value: not a revision")
            ) from None
        current = await self._get(target)  # update never creates
        reply = await self.admission.apply(
            managed(current, manifest, request),
            dry_run=_dry_run(request),
            field_validation=_validation(request),
            expected_revision=expected,
        )
        return await self._written(request, target, target.name, _result(reply), 200, reply)

    async def _written(
        self,
        request: web.Request,
        target: Target,
        name: str,
        result: ObjectResult,
        code: int,
        reply: ApplyReply,
    ) -> web.StreamResponse:
        if result.outcome == "rejected":
            raise Refused(result.status or status.bad_request(result.message))
        warnings = [*reply.warnings, *result.warnings]
        if _dry_run(request):
            body = await _body(request)
            response = answer(_in_target(body, target), code)
        else:
            found = await self._get(Target(target.resource, target.namespace, name))
            response = answer(found, code)
        for warning in warnings:
            response.headers.add("Warning", f'299 - "{warning}"')
        return response

    async def patch(self, request: web.Request, target: Target) -> web.StreamResponse:
        """The patch applied to the object as read, written on condition that it is still at that revision;
        a patch that names no resourceVersion is re-applied when someone wrote in between, as upstream."""
        assert target.name is not None
        body = await _raw_body(request)
        media = media_type(request.headers.get("Content-Type"))
        if media not in PATCH_TYPES:
            raise Refused(status.unsupported_media_type(PATCH_TYPES))
        for _ in range(PATCH_ATTEMPTS):
            current = await self._current_or_none(target, creating=media == APPLY_PATCH)
            if current is None:
                return await self._apply_create(request, target, body)
            revision = int(current["metadata"]["resourceVersion"])
            patched = self._patched(request, target, media, current, body)
            _check_name(patched, target.name)
            named = (patched.get("metadata") or {}).get("resourceVersion")
            try:
                expected = parse_revision(str(named)) if named not in (None, "") else revision
            except ValueError:
                raise Refused(
                    status.bad_request("metadata.resourceVersion: Invalid value: not a revision")
                ) from None
            reply = await self.admission.apply(
                _in_target(patched, target),
                dry_run=_dry_run(request),
                field_validation=_validation(request),
                expected_revision=expected,
            )
            result = _result(reply)
            if _is_conflict(result) and expected == revision and named in (None, "", str(revision)):
                continue
            return await self._written(request, target, target.name, result, 200, reply)
        raise Refused(status.conflict(target.resource.kind, target.name))

    async def _current_or_none(self, target: Target, *, creating: bool) -> dict[str, Any] | None:
        try:
            return await self._get(target)
        except Refused as refused:
            if creating and refused.answer.get("code") == 404:
                return None
            raise

    def _patched(
        self, request: web.Request, target: Target, media: str, current: dict[str, Any], body: bytes
    ) -> dict[str, Any]:
        try:
            if media == APPLY_PATCH:
                return server_side_apply(current, _in_target(decode_apply(body), target), request)
            patched = apply_patch(media, current, body, target.resource.kind)
            _metadata(patched, target.resource)
            return managed(current, patched, request)
        except PatchError as error:
            raise Refused(error.status) from None

    async def _apply_create(self, request: web.Request, target: Target, body: bytes) -> web.StreamResponse:
        """Server-side apply of an object that does not exist yet: a create."""
        try:
            applied = decode_apply(body)
        except PatchError as error:
            raise Refused(error.status) from None
        manifest = server_side_apply(None, _in_target(applied, target), request)
        reply = await self.admission.apply(
            manifest, create_only=True, dry_run=_dry_run(request), field_validation=_validation(request)
        )
        assert target.name is not None
        return await self._written(request, target, target.name, _result(reply), 201, reply)

    async def delete(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None
        if target.resource.kind == "Namespace":
            return await self._delete_namespace(target.name, dry_run=_dry_run(request))
        current = await self._get(target)
        if _dry_run(request):  # checked, not done: the object stays
            return answer(_deleted(target, current))
        reply = await self.admission.delete(target.resource.kind, target.namespace, target.name)
        result = _result(reply)
        if result.outcome == "not_found":
            raise Refused(status.not_found(target.resource.plural, target.resource.group, target.name))
        if result.outcome == "rejected":
            raise Refused(result.status or status.bad_request(result.message))
        if result.outcome == "pending":
            # Marked for deletion: the object stays until its pods have stopped, as with a finalizer (it may
            # be gone already when read again).
            with contextlib.suppress(Refused):
                return answer(await self._get(target), 202)
        return answer(_deleted(target, current))

    async def _create_namespace(self, request: web.Request, target: Target) -> web.StreamResponse:
        """Namespaces are where objects are: creating one only names it (it exists once it holds objects)."""
        body = await _body(request)
        name = str(_metadata(body, target.resource).get("name") or "")
        if not name:
            raise Refused(
                status.failure(
                    422,
                    "Invalid",
                    'Namespace "" is invalid: metadata.name: Required value: name or generateName is required',
                )
            )
        return answer(await self._get(Target(target.resource, None, name)), 201)

    async def _delete_namespace(self, name: str, *, dry_run: bool) -> web.StreamResponse:
        """Everything in the namespace is deleted, as upstream's namespace controller does."""
        namespace = lookup("", "v1", "namespaces")
        assert namespace is not None
        shown_ns = await self._get(Target(namespace, None, name))
        for resource in RESOURCES if not dry_run else ():
            if not resource.namespaced or resource.kind == "Event" or resource.group == "events.k8s.io":
                continue
            items, _, _ = await self._collect(Target(resource, name), None, None, None, None)
            for obj in items:
                await self.admission.delete(resource.kind, name, str((obj.get("metadata") or {}).get("name")))
        return answer({**shown_ns, "status": {"phase": "Terminating"}})

    async def evict(self, request: web.Request, target: Target) -> web.StreamResponse:
        """`pods/eviction`: the pod is deleted as a bound pod is, which admission answers with `pods.evicted`
        (the scheduler and the DRA allocator release what it held, the node agent stops it)."""
        assert target.name is not None
        await _body(request)  # an Eviction; its deleteOptions are not honoured (see docs/kubernetes-api.md)
        await self._get(target)
        result = _result(await self.admission.delete("Pod", target.namespace, target.name))
        if result.outcome == "rejected":
            raise Refused(result.status or status.bad_request(result.message))
        return answer(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201
        )

    async def log(self, request: web.Request, target: Target) -> web.StreamResponse:
        """`pods/log`: the simulated kubelet runs no containers, so a pod has no log to show."""
        assert target.name is not None
        await self._get(target)
        message = (
            f'pod "{target.name}" has no container logs: the node agent simulates a kubelet and runs no '
            "containers"
        )
        raise Refused(status.bad_request(message))

    async def delete_collection(self, request: web.Request, target: Target) -> web.StreamResponse:
        labels, fields = _selectors(request, target.resource)
        items, _, revision = await self._collect(target, labels, fields, None, None)
        for obj in items if not _dry_run(request) else []:
            meta = obj.get("metadata") or {}
            await self.admission.delete(target.resource.kind, meta.get("namespace"), str(meta.get("name")))
        return answer(object_list(target.resource, items, revision, None))


def _check_name(manifest: dict[str, Any], name: str) -> None:
    """An update or patch keeps the object's name (`checkName`): anything else is a 400, never a retry."""
    given = (manifest.get("metadata") or {}).get("name")
    if given != name:
        message = f"the name of the object ({given or ''}) does not match the name on the URL ({name})"
        raise Refused(status.bad_request(message))


RETURNS_DELETED = frozenset({"Pod", "Namespace"})
"""Kinds whose delete answers with the object (marked for deletion), as their upstream registries do; the
others answer with a Success `Status` (the kubernetes client decodes each as its API says)."""


def _deleted(target: Target, current: dict[str, Any]) -> dict[str, Any]:
    """What a delete answers with."""
    assert target.name is not None
    if target.resource.kind in RETURNS_DELETED:
        metadata = {"deletionTimestamp": _now(), **(current.get("metadata") or {})}
        return {**current, "metadata": metadata}
    details = {"name": target.name, "kind": target.resource.plural, "uid": current["metadata"].get("uid")}
    if target.resource.group:
        details["group"] = target.resource.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def server_side_apply(
    current: dict[str, Any] | None, applied: dict[str, Any], request: web.Request
) -> dict[str, Any]:
    """The applied configuration merged into the object by its field manager; a field another manager owns
    with another value is a 409 Conflict unless `force=true`."""
    manager = request.query.get("fieldManager")
    if not manager:
        message = 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
        raise Refused(status.failure(422, "Invalid", message))
    try:
        merged, _ = apply_configuration(current, applied, manager, _flag(request.query.get("force")), _now())
    except ApplyConflict as conflict:
        raise Refused(conflict.status) from None
    return merged


def managed(before: dict[str, Any] | None, after: dict[str, Any], request: web.Request) -> dict[str, Any]:
    """`after` with its field managers updated for a write that is not an apply (create, update, patch)."""
    version = str(after.get("apiVersion") or "")
    fields = record_update(before, after, _manager(request), "Update", _now(), version)
    return {**after, "metadata": {**(after.get("metadata") or {}), "managedFields": fields}}


def _manager(request: web.Request) -> str:
    """The write's field manager: `fieldManager`, else the client's name from its User-Agent, as upstream."""
    given = request.query.get("fieldManager")
    if given:
        return given
    agent = request.headers.get("User-Agent") or "unknown"
    return agent.split("/")[0][:128] or "unknown"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_conflict(result: ObjectResult) -> bool:
    return result.outcome == "rejected" and (result.status or {}).get("code") == 409


async def _raw_body(request: web.Request) -> bytes:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise Refused(status.request_entity_too_large(f"limit is {MAX_BODY}"))
    raw = await request.read()
    if len(raw) > MAX_BODY:
        raise Refused(status.request_entity_too_large(f"limit is {MAX_BODY}"))
    return raw


def _who_am_i(request: web.Request) -> web.StreamResponse:
    """`kubectl auth whoami`: who the token authenticated as."""
    user = request["user"]
    info = {"username": user.name, "uid": user.uid, "groups": [*user.groups, "system:authenticated"]}
    review = {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": info},
    }
    return answer(review, 201)


def _typed(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    return as_served(resource, obj)


async def _write_event(response: web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
    """One watch event; a watch that asked for a Table gets each object as a one-row Table."""
    table_resource = response.get(TABLE_OF)
    if table_resource is not None and kind not in ("BOOKMARK", "ERROR"):
        obj = table_of(table_resource, [obj], None)
    await response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")


async def _write_bookmark(
    response: web.StreamResponse, resource: Resource, revision: int, *, initial_end: bool = False
) -> None:
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if initial_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    bookmark = {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": metadata}
    await _write_event(response, "BOOKMARK", bookmark)


def _flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def _limit(value: str | None) -> int | None:
    limit = _int_param("limit", value)
    return limit if limit is not None and limit > 0 else None


def _int_param(name: str, value: str | None) -> int | None:
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


def _selectors(request: web.Request, resource: Resource) -> tuple[LabelSelector | None, FieldSelector | None]:
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


def _watched(
    target: Target, labels: LabelSelector | None, fields: FieldSelector | None
) -> Callable[[Change], bool]:
    """Which changes a watch on `target` with these selectors wants."""

    def wants(change: Change) -> bool:
        obj = change.object
        metadata = obj.get("metadata") or {}
        if obj.get("kind") != target.resource.kind:
            return False
        if target.namespace and metadata.get("namespace") != target.namespace:
            return False
        if target.name and metadata.get("name") != target.name:
            return False
        return _matches(shown(obj, change.revision), labels, fields)

    return wants


def _involved(resource: Resource, fields: FieldSelector | None) -> str | None:
    """The object an Event list is about (`involvedObject.name=`), so admission reads only its stories."""
    if resource.kind != "Event" or fields is None:
        return None
    names = ("involvedObject.name", "regarding.name")
    return next((t.value for t in fields.terms if t.field in names and not t.negated), None)


def _matches(obj: dict[str, Any], labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches(labels_of(obj)):
        return False
    return fields is None or fields.matches(selectable_fields(obj))


def _dry_run(request: web.Request) -> bool:
    return request.query.get("dryRun") == "All"


def _validation(request: web.Request) -> FieldValidation:
    value = request.query.get("fieldValidation") or "Strict"
    if value not in ("Strict", "Warn", "Ignore"):
        raise Refused(status.bad_request(f'fieldValidation: Unsupported value: "{value}"'))
    return value  # type: ignore[return-value]


async def _body(request: web.Request) -> dict[str, Any]:
    """The request's object, JSON or YAML; refused as the API server refuses what it cannot decode."""
    raw = await _raw_body(request)
    # No Content-Type is JSON, as the API server negotiates it (the kubernetes client sends none on create).
    media = media_type(request.headers.get("Content-Type") or "application/json").lower()
    try:
        if media in ("application/yaml", "application/apply-patch+yaml"):
            loaded = yaml.load(raw.decode(), Loader=YAML_LOADER)
        elif media.startswith("application/") and media.endswith("json"):
            loaded = json.loads(raw)
        else:
            raise Refused(status.unsupported_media_type(["application/json", "application/yaml"]))
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


def _in_target(manifest: dict[str, Any], target: Target) -> dict[str, Any]:
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
    metadata = dict(_metadata(manifest, resource))
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


def _metadata(manifest: dict[str, Any], resource: Resource) -> dict[str, Any]:
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
    each becomes U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrubbed(key): _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    return value


def _result(reply: ApplyReply) -> ObjectResult:
    if not reply.results:
        raise Refused(status.internal_error("admission answered with no result"))
    return reply.results[0]


async def close_quietly(response: web.StreamResponse) -> None:
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
