"""The writing verbs: create, update, patch (every patch type and server-side apply), delete, deletecollection,
namespaces, eviction, logs and `kubectl auth whoami`. Every rule is admission's; here a request becomes
admission's request and its answer the API server's."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

from aiohttp import web

from libs.events.rpc import ApplyReply, ObjectResult
from libs.kubeapi import status
from libs.kubeapi.patches import (
    APPLY_PATCH,
    PATCH_TYPES,
    ApplyConflict,
    PatchError,
    apply_configuration,
    apply_patch,
    decode_apply,
    media_type,
    record_update,
)
from libs.kubeapi.resources import lookup
from services.api_server.answers import USER, Refused, answer, warning_header
from services.api_server.objects import object_list, parse_revision, shown
from services.api_server.pod_logs import serve_log
from services.api_server.reads import Reads, typed
from services.api_server.requests import (
    DeleteOptions,
    check_name,
    delete_options,
    dry_run,
    eviction_options,
    field_manager,
    field_validation,
    flag,
    in_target,
    metadata_of,
    now_rfc3339,
    read_body,
    read_object,
    selectors,
)
from services.api_server.routes import Target

PATCH_ATTEMPTS = 5
GENERATE_NAME_ATTEMPTS = 8
"""Names a create with `generateName` tries before it answers 409, as upstream retries a generated name."""
NAME_SUFFIX_LETTERS = "bcdfghjklmnpqrstvwxz2456789"
"""What a generated name's five characters are drawn from (upstream's: no vowels, no look-alikes)."""
MAX_GENERATED_PREFIX = 58
RETURNS_DELETED = frozenset({"Pod", "Namespace"})
"""Kinds whose delete answers with the object (marked for deletion), as their upstream registries do; the
others answer with a Success `Status` (the kubernetes client decodes each as its API says)."""


class Verbs(Reads):
    """Every verb: the reading ones and create, update, patch, delete, deletecollection and the pods' eviction
    and log subresources."""

    async def create(self, request: web.Request, target: Target) -> web.StreamResponse:
        if target.resource.kind == "SelfSubjectReview":
            return _who_am_i(request)
        manifest = managed(None, in_target(await read_object(request), target), request)
        metadata = manifest.get("metadata") or {}
        prefix = metadata.get("generateName") if not metadata.get("name") else None
        for _ in range(GENERATE_NAME_ATTEMPTS if isinstance(prefix, str) and prefix else 1):
            if isinstance(prefix, str) and prefix:
                manifest = {**manifest, "metadata": {**metadata, "name": generated_name(prefix)}}
            name = str((manifest.get("metadata") or {}).get("name") or "")
            reply = await self.admission.apply(
                manifest,
                create_only=True,
                dry_run=dry_run(request),
                field_validation=field_validation(request),
            )
            result = result_of(reply)
            if result.outcome != "unchanged":
                return await self._written(request, target, name, result, 201, reply)
        raise Refused(status.already_exists(target.resource.plural, target.resource.group, name))

    async def update(self, request: web.Request, target: Target) -> web.StreamResponse:
        manifest = in_target(await read_object(request), target)
        assert target.name is not None
        check_name(manifest, target.name)
        try:
            expected = parse_revision((manifest.get("metadata") or {}).get("resourceVersion"))
        except ValueError:
            raise Refused(
                status.bad_request("metadata.resourceVersion: Invalid value: not a revision")
            ) from None
        current = await self._get(target)  # update never creates
        if _implicit_namespace(current):
            manifest, expected = _as_new(manifest), None
        reply = await self.admission.apply(
            managed(current, manifest, request),
            dry_run=dry_run(request),
            field_validation=field_validation(request),
            expected_revision=expected,
        )
        return await self._written(request, target, target.name, result_of(reply), 200, reply)

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
        if dry_run(request):
            body = await read_object(request)
            response = answer(in_target(body, target), code)
        elif result.object is not None and result.revision is not None:
            served = typed(target.resource, shown(result.object, result.revision))
            self.last_seen.remember(Target(target.resource, target.namespace, name), served)
            response = answer(served, code)
        else:
            found = await self._get(Target(target.resource, target.namespace, name))
            response = answer(found, code)
        for warning in warnings:
            response.headers.add("Warning", warning_header(warning))
        return response

    async def patch(self, request: web.Request, target: Target) -> web.StreamResponse:
        """The patch applied to the object as read, written on condition that it is still at that revision;
        a patch that names no resourceVersion is re-applied when someone wrote in between, as upstream. The
        first attempt starts from the object as this server last saw it, when it did (see last_seen.py)."""
        assert target.name is not None
        body = await read_body(request)
        media = media_type(request.headers.get("Content-Type"))
        if media not in PATCH_TYPES:
            raise Refused(status.unsupported_media_type(PATCH_TYPES))
        # A dry run is not checked against the revision it starts from: it always reads.
        guess = None if dry_run(request) else self.last_seen.guess(target)
        for _ in range(PATCH_ATTEMPTS + (guess is not None)):
            current = guess or await self._current_or_none(target, creating=media == APPLY_PATCH)
            from_guess, guess = guess is not None, None
            if current is None:
                return await self._apply_create(request, target, body)
            revision = int(current["metadata"]["resourceVersion"])
            try:
                patched = self._patched(request, target, media, current, body)
            except Refused:
                if from_guess:  # perhaps only the guess is what the patch does not apply to
                    continue
                raise
            check_name(patched, target.name)
            named = (patched.get("metadata") or {}).get("resourceVersion")
            if from_guess and named not in (None, "", str(revision)):
                continue  # the caller names another version than the guess's: read what is stored
            try:
                expected = parse_revision(str(named)) if named not in (None, "") else revision
            except ValueError:
                raise Refused(
                    status.bad_request("metadata.resourceVersion: Invalid value: not a revision")
                ) from None
            if _implicit_namespace(current):
                patched, expected = _as_new(patched), None
            reply = await self.admission.apply(
                in_target(patched, target),
                dry_run=dry_run(request),
                field_validation=field_validation(request),
                expected_revision=expected,
            )
            result = result_of(reply)
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
                return server_side_apply(current, in_target(decode_apply(body), target), request)
            patched = apply_patch(media, current, body, target.resource.kind)
            metadata_of(patched, target.resource)
            return managed(current, patched, request)
        except PatchError as error:
            raise Refused(error.status) from None

    async def _apply_create(self, request: web.Request, target: Target, body: bytes) -> web.StreamResponse:
        """Server-side apply of an object that does not exist yet: a create."""
        try:
            applied = decode_apply(body)
        except PatchError as error:
            raise Refused(error.status) from None
        manifest = server_side_apply(None, in_target(applied, target), request)
        reply = await self.admission.apply(
            manifest, create_only=True, dry_run=dry_run(request), field_validation=field_validation(request)
        )
        assert target.name is not None
        return await self._written(request, target, target.name, result_of(reply), 201, reply)

    async def delete(self, request: web.Request, target: Target) -> web.StreamResponse:
        assert target.name is not None
        if target.resource.kind == "Namespace":
            return await self._delete_namespace(target.name, dry_run=dry_run(request))
        options = await delete_options(request)
        current = await self._get(target)
        _check_preconditions(target, current, options)
        if options.dry_run or dry_run(request):  # checked, not done: the object stays
            return answer(_deleted(target, current))
        self.last_seen.forget(target)
        reply = await self.admission.delete(
            target.resource.kind,
            target.namespace,
            target.name,
            propagation=options.propagation,
            grace_seconds=options.grace_seconds,
        )
        result = result_of(reply)
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

    async def _delete_namespace(self, name: str, *, dry_run: bool) -> web.StreamResponse:
        """Admission deletes everything in the namespace with it, as upstream's namespace controller does."""
        namespace = lookup("", "v1", "namespaces")
        assert namespace is not None
        target = Target(namespace, None, name)
        shown_ns = await self._get(target)
        if not dry_run:
            result = result_of(await self.admission.delete("Namespace", None, name))
            if result.outcome == "rejected":
                raise Refused(result.status or status.bad_request(result.message))
            if result.outcome == "pending":
                # Stored and Terminating until it is empty: answered as it is now, so that a client waiting
                # for it to go (kubectl delete) waits for this uid, not the one it had before it was stored.
                with contextlib.suppress(Refused):
                    return answer(await self._get(target))
        return answer({**shown_ns, "status": {"phase": "Terminating"}})

    async def evict(self, request: web.Request, target: Target) -> web.StreamResponse:
        """`pods/eviction`: the pod is deleted as a bound pod is, which admission answers with `pods.evicted`
        (the scheduler and the DRA allocator release what it held, the node agent stops it, within the
        Eviction's grace period if it gives one)."""
        assert target.name is not None
        options = eviction_options(await read_object(request))
        await self._get(target)
        if options.dry_run or dry_run(request):
            return answer(_evicted(), 201)
        reply = await self.admission.delete(
            "Pod", target.namespace, target.name, grace_seconds=options.grace_seconds
        )
        result = result_of(reply)
        if result.outcome == "rejected":
            raise Refused(result.status or status.bad_request(result.message))
        return answer(_evicted(), 201)

    async def log(self, request: web.Request, target: Target) -> web.StreamResponse:
        """`pods/log`: a process-runtime pod's container output (a simulated kubelet's pods have none)."""
        return await serve_log(request, await self._get(target), lambda: self._get(target))

    async def delete_collection(self, request: web.Request, target: Target) -> web.StreamResponse:
        options = await delete_options(request)
        labels, fields = selectors(request, target.resource)
        items, _, revision = await self._collect(target, labels, fields, None, None)
        for obj in items if not (options.dry_run or dry_run(request)) else []:
            meta = obj.get("metadata") or {}
            await self.admission.delete(
                target.resource.kind,
                meta.get("namespace"),
                str(meta.get("name")),
                propagation=options.propagation,
                grace_seconds=options.grace_seconds,
            )
        return answer(object_list(target.resource, items, revision, None))


def generated_name(prefix: str) -> str:
    """`prefix` (cut to leave room) and five random characters, as upstream's SimpleNameGenerator makes it."""
    suffix = "".join(secrets.choice(NAME_SUFFIX_LETTERS) for _ in range(5))
    return prefix[:MAX_GENERATED_PREFIX] + suffix


def _evicted() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _check_preconditions(target: Target, current: dict[str, Any], options: DeleteOptions) -> None:
    """A delete's preconditions on uid and resourceVersion, refused with 409 as upstream refuses them."""
    assert target.name is not None
    metadata = current.get("metadata") or {}
    for field, wanted in (("UID", options.uid), ("ResourceVersion", options.resource_version)):
        actual = metadata.get("uid" if field == "UID" else "resourceVersion")
        if wanted is not None and wanted != actual:
            detail = (
                f"Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}"
            )
            raise Refused(status.conflict(target.resource.kind, target.name, detail))


def _deleted(target: Target, current: dict[str, Any]) -> dict[str, Any]:
    """What a delete answers with."""
    assert target.name is not None
    if target.resource.kind in RETURNS_DELETED:
        metadata = {"deletionTimestamp": now_rfc3339(), **(current.get("metadata") or {})}
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
        merged, _ = apply_configuration(
            current, applied, manager, flag(request.query.get("force")), now_rfc3339()
        )
    except ApplyConflict as conflict:
        raise Refused(conflict.status) from None
    return merged


def managed(before: dict[str, Any] | None, after: dict[str, Any], request: web.Request) -> dict[str, Any]:
    """`after` with its field managers updated for a write that is not an apply (create, update, patch)."""
    version = str(after.get("apiVersion") or "")
    fields = record_update(before, after, field_manager(request), "Update", now_rfc3339(), version)
    return {**after, "metadata": {**(after.get("metadata") or {}), "managedFields": fields}}


def _is_conflict(result: ObjectResult) -> bool:
    return result.outcome == "rejected" and (result.status or {}).get("code") == 409


def _who_am_i(request: web.Request) -> web.StreamResponse:
    """`kubectl auth whoami`: who the token authenticated as."""
    user = request[USER]
    info = {"username": user.name, "uid": user.uid, "groups": [*user.groups, "system:authenticated"]}
    review = {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": info},
    }
    return answer(review, 201)


def result_of(reply: ApplyReply) -> ObjectResult:
    if not reply.results:
        raise Refused(status.internal_error("admission answered with no result"))
    return reply.results[0]


def _implicit_namespace(current: dict[str, Any]) -> bool:
    """A namespace that exists because objects are in it, never stored (admission shows it without a
    creationTimestamp): writing it stores it."""
    return current.get("kind") == "Namespace" and "creationTimestamp" not in (current.get("metadata") or {})


def _as_new(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest of an object about to be stored for the first time: no uid or resourceVersion of the
    implicit one it replaces."""
    metadata = {
        k: v for k, v in (manifest.get("metadata") or {}).items() if k not in ("uid", "resourceVersion")
    }
    return {**manifest, "metadata": metadata}
