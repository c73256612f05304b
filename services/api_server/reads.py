"""The reading verbs: get, list (pages, selectors, Tables) and watch. Every rule is admission's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from libs.events.rpc import Change, FramedPage
from libs.kubeapi import status
from libs.kubeapi.resources import Resource
from libs.kubeapi.selectors import (
    FieldSelector,
    LabelSelector,
    labels_of,
    selectable_fields,
)
from libs.kubeapi.versions import as_served
from services.api_server.answers import Refused, answer
from services.api_server.backend import Admission
from services.api_server.feed import ChangeFeed, Expired
from services.api_server.last_seen import LastSeen
from services.api_server.listed import ListedObjects
from services.api_server.objects import continue_token, object_list, parse_revision, read_continue, shown
from services.api_server.read_ahead import ReadAhead
from services.api_server.requests import (
    check_list_options,
    flag,
    int_param,
    limit_param,
    selectors,
    send_initial_events,
)
from services.api_server.routes import Target
from services.api_server.tables import TABLE_MEDIA, table_of, wants_table

TABLE_OF = web.ResponseKey("podway.table_of", Resource)
"""Set on a watch's response when its events carry Tables of this resource."""

ADMISSION_PAGE = 500
"""Objects asked of admission at once for a list without a limit (its whole answer may be more than the bus
carries)."""

READ_AHEAD_PAGES = 2
"""Pages of a paginated list read ahead of its client: admission reads one while it sends the other."""

BOOKMARK_S = 10.0
"""How often a watch that allows bookmarks is told the current revision."""


class Reads:
    """The reading verbs: get, list, watch, on admission and the change feed."""

    def __init__(
        self, admission: Admission, feed: ChangeFeed, *, listed: ListedObjects | None = None
    ) -> None:
        self.admission = admission
        self.feed = feed
        self.read_ahead = ReadAhead()
        self.last_seen = LastSeen()
        self.listed = listed if listed is not None else ListedObjects()

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
        served = typed(target.resource, shown(manifest, revision))
        self.last_seen.remember(target, served)
        return served

    async def fill_lists(self, kind: str) -> int:
        """Decode every object of `kind` (as many as the list store keeps) before a list asks for them, as
        kube-apiserver fills its watch cache before it serves: the first list then decodes only what changed
        since. How many the store holds."""
        token: str | None = None
        self.listed.begin(kind)
        while not self.listed.full(kind):
            page = await self.admission.list(kind, None, limit=ADMISSION_PAGE, continue_token=token)
            self.listed.decode_ahead(kind, page.items, page.item_revisions)
            token = page.continue_token
            if token is None:
                break
        return len(self.listed)

    async def list_objects(self, request: web.Request, target: Target) -> web.StreamResponse:
        if flag(request.query.get("watch")):
            return await self.watch(request, target)
        check_list_options(request)
        labels, fields = selectors(request, target.resource)
        limit = limit_param(request.query.get("limit"))
        token, first_revision = None, None
        if raw := request.query.get("continue"):
            try:
                token, first_revision = read_continue(raw)
            except ValueError:
                raise Refused(status.bad_request("continue key is not valid: illegal base64 data")) from None
        items, next_token, revision = await self._collect(target, labels, fields, limit, token)
        if limit is not None and next_token is not None:
            self._read_ahead(target, limit, next_token, _involved(target, fields))
        revision = first_revision or revision
        token_out = continue_token(next_token, revision) if next_token else None
        if wants_table(request):
            table = table_of(target.resource, items, revision, token_out, row_of=self.listed.row)
            return answer(table, content_type=TABLE_MEDIA)
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
        kind = target.resource.kind
        if token is None:
            self.listed.begin(kind)
        while True:
            want = ADMISSION_PAGE if limit is None else max(limit - len(items), 1)
            reply = await self._page(target, want, token, _involved(target, fields))
            revision = revision or reply.revision
            for encoded, item_revision in zip(reply.items, reply.item_revisions, strict=False):
                obj = self.listed.shown(kind, encoded, item_revision)
                if matches(obj, labels, fields):
                    items.append(obj)
            token = reply.continue_token
            if token is None or (limit is not None and len(items) >= limit):
                return items, token, revision

    async def _page(self, target: Target, want: int, token: str | None, involved: str | None) -> FramedPage:
        """Admission's page, read ahead when the page before was answered (see read_ahead.py)."""
        key = (target.resource.kind, target.namespace, want, token, involved)
        if token is not None and (ahead := await self.read_ahead.take(key)) is not None:
            return ahead
        return await self.admission.list(
            target.resource.kind, target.namespace, limit=want, continue_token=token, involved=involved
        )

    def _read_ahead(
        self, target: Target, want: int, token: str, involved: str | None, pages: int = READ_AHEAD_PAGES
    ) -> None:
        """Read the page after `token`, and once it is read the next, `pages` pages in all."""

        async def read() -> FramedPage:
            reply = await self.admission.list(
                target.resource.kind, target.namespace, limit=want, continue_token=token, involved=involved
            )
            if pages > 1 and reply.continue_token is not None:
                self._read_ahead(target, want, reply.continue_token, involved, pages - 1)
            # Decoded now, while the client reads the page before: its request then finds them decoded.
            self.listed.decode_ahead(target.resource.kind, reply.items, reply.item_revisions)
            return reply

        self.read_ahead.start((target.resource.kind, target.namespace, want, token, involved), read)

    async def watch(self, request: web.Request, target: Target) -> web.StreamResponse:
        """Changes as a stream of JSON events. Everything that can fail (the initial list, the backlog since
        `resourceVersion`) is read before the answer starts, so that a failure is a `Status`, not a stream
        cut short."""
        labels, fields = selectors(request, target.resource)
        try:
            since = parse_revision(request.query.get("resourceVersion"))
        except ValueError:
            raise Refused(status.bad_request("resourceVersion: Invalid value: not a revision")) from None
        # Without sendInitialEvents, a watch from no revision (or "0") starts with the objects as they are,
        # as a legacy watch does; a watch-list client (sendInitialEvents=true) is told where they end.
        send_initial = send_initial_events(request)
        initial = since in (None, 0) if send_initial is None else send_initial
        bookmarks = flag(request.query.get("allowWatchBookmarks"))
        seconds = int_param("timeoutSeconds", request.query.get("timeoutSeconds"))
        timeout = 1800 if seconds is None else seconds
        start = since or 0
        items: list[dict[str, Any]] = []
        if initial:
            items, _, start = await self._collect(target, labels, fields, None, None)
        elif not since:
            start = await self.feed.latest()  # sendInitialEvents=false from no revision: from now on
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
                await _write_event(response, "ADDED", typed(target.resource, obj))
            if send_initial and bookmarks:
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
            await _write_event(response, kind, typed(resource, shown(change.object, change.revision)))


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
        return matches(shown(obj, change.revision), labels, fields)

    return wants


def _involved(target: Target, fields: FieldSelector | None) -> str | None:
    """The object an Event list in one namespace is about (`involvedObject.name=`, `regarding.name=` in
    events.k8s.io), so admission reads only its stories; a list across namespaces reads the newest events
    and selects from them."""
    if target.resource.kind != "Event" or fields is None or not target.namespace:
        return None
    return next((t.value for t in fields.terms if t.field == "involvedObject.name" and not t.negated), None)


def matches(obj: dict[str, Any], labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches(labels_of(obj)):
        return False
    return fields is None or fields.matches(selectable_fields(obj))


def typed(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
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
