"""The OpenAPI documents of the served resources: `/openapi/v2` (one swagger 2.0 document) and `/openapi/v3`
(an index, and one self-contained document per group version), in kube-apiserver's shapes.

kubectl reads them for more than `explain`: it sends `fieldValidation=Strict` (leaving unknown and duplicate
fields to the server) only when a kind's PATCH operation lists the `fieldValidation` query parameter in the
v3 document, and computes `apply`'s strategic merge patches from the v3 schemas' patch merge keys. The
documents are static, built once and cached: callers must not modify what they are given."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Final

from libs.kubeapi.discovery import GIT_VERSION
from libs.kubeapi.resources import RESOURCES, Resource, in_group_version
from libs.kubeapi.schemas import (
    META,
    Schema,
    kind_definition_name,
    kind_definitions,
    list_definition_name,
)

_STATUS: Final = f"{META}.Status"
_DELETE_OPTIONS: Final = f"{META}.DeleteOptions"
_WATCH_EVENT: Final = f"{META}.WatchEvent"
_PATCH: Final = f"{META}.Patch"
_EVICTION: Final = "io.k8s.api.policy.v1.Eviction"
_STRING_BODY: Final = "string"
"""The body of a log answer: plain text, no definition."""

_PATCH_TYPES: Final = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
_PRODUCES: Final = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
_WATCH_PRODUCES: Final = _PRODUCES + (
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
)


@dataclass(frozen=True, slots=True)
class _Param:
    name: str
    kind: str
    description: str
    location: str = "query"


_PRETTY: Final = _Param("pretty", "string", "If 'true', then the output is pretty printed.")
_LIST: Final = (
    _Param("allowWatchBookmarks", "boolean", "Asks for watch events of type BOOKMARK."),
    _Param("continue", "string", "The token of the next chunk of a list, from the previous chunk."),
    _Param("fieldSelector", "string", "Restricts the list to objects whose fields match."),
    _Param("labelSelector", "string", "Restricts the list to objects whose labels match."),
    _Param("limit", "integer", "The largest number of objects to return in one chunk."),
    _Param("resourceVersion", "string", "Which version of the list may be answered with."),
    _Param("resourceVersionMatch", "string", "How resourceVersion applies to the list."),
    _Param("sendInitialEvents", "boolean", "Starts a watch with the current objects as ADDED events."),
    _Param("timeoutSeconds", "integer", "How long a list or watch may last."),
    _Param("watch", "boolean", "Watches for changes instead of listing."),
)
_DRY_RUN: Final = _Param(
    "dryRun", "string", "When present (`All`), the request is checked but not persisted."
)
_FIELD_MANAGER: Final = _Param("fieldManager", "string", "The name of the actor making the change.")
_FIELD_VALIDATION: Final = _Param(
    "fieldValidation",
    "string",
    "What the server does with unknown or duplicate fields in the request: Ignore drops them, Warn (the "
    "default) drops them with a warning for each, Strict fails the request.",
)
_FORCE: Final = _Param("force", "boolean", "Takes over conflicting fields of other managers (apply only).")
_WRITE: Final = (_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION)
_DELETE: Final = (
    _DRY_RUN,
    _Param("gracePeriodSeconds", "integer", "Seconds before the object is deleted; zero deletes it now."),
    _Param(
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        "boolean",
        "Deletes an object that cannot be read back from storage.",
    ),
    _Param("orphanDependents", "boolean", "Deprecated: use propagationPolicy."),
    _Param(
        "propagationPolicy", "string", "Orphan, Background or Foreground garbage collection of dependents."
    ),
)
_LOG: Final = (
    _Param("container", "string", "The container whose log is read; optional when the pod has one."),
    _Param("follow", "boolean", "Streams the log as it grows."),
    _Param("insecureSkipTLSVerifyBackend", "boolean", "Skips verifying the serving certificate of the node."),
    _Param("limitBytes", "integer", "The most bytes to return."),
    _Param("previous", "boolean", "Reads the log of the previous, terminated container."),
    _Param("sinceSeconds", "integer", "Only the log lines of the last seconds."),
    _Param("stream", "string", "All, Stdout or Stderr."),
    _Param("tailLines", "integer", "Only the last lines."),
    _Param("timestamps", "boolean", "Prefixes every line with its RFC 3339 timestamp."),
)
_NAME: Final = _Param("name", "string", "name of the object", "path")
_NAMESPACE: Final = _Param(
    "namespace", "string", "object name and auth scope, such as for teams and projects", "path"
)


@dataclass(frozen=True, slots=True)
class _Operation:
    """One operation, before it is rendered in v2's or v3's spelling."""

    method: str
    operation_id: str
    action: str
    description: str
    gvk: dict[str, str]
    params: tuple[_Param, ...]
    answers: tuple[tuple[str, str], ...]
    body: str = ""
    body_types: tuple[str, ...] = ("*/*",)
    produces: tuple[str, ...] = _PRODUCES


_Path = tuple[str, tuple[_Param, ...], tuple[_Operation, ...]]


def _id_part(resource: Resource) -> str:
    """`CoreV1`, `SchedulingV1alpha2`: the group version as operation ids spell it."""
    group = resource.group.split(".")[0].capitalize() if resource.group else "Core"
    return group + resource.version.capitalize()


_Answers = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class _Namer:
    """Builds one resource's operations, their ids spelled as upstream's (`deleteCoreV1CollectionNamespacedPod`)."""

    resource: Resource

    def op(
        self,
        verb: str,
        action: str,
        text: str,
        params: tuple[_Param, ...],
        answers: _Answers,
        body: str = "",
        *,
        infix: str = "",
        suffix: str = "",
    ) -> _Operation:
        r = self.resource
        scope = "Namespaced" if r.namespaced else ""
        operation_id = f"{verb}{_id_part(r)}{infix}{scope}{r.kind}{suffix}"
        gvk = {"group": r.group, "kind": r.kind, "version": r.version}
        method = _METHODS[action]
        produces = _WATCH_PRODUCES if action in ("list", "watch", "watchlist") else _PRODUCES
        return _Operation(method, operation_id, action, text, gvk, params, answers, body, produces=produces)

    def list(self) -> _Operation:
        listed = list_definition_name(self.resource)
        return self.op(
            "list", "list", f"list or watch objects of kind {self.resource.kind}", _LIST, (("200", listed),)
        )

    def patch(self, text: str, suffix: str = "") -> _Operation:
        item = kind_definition_name(self.resource)
        changed = (("200", item), ("201", item))
        patch = self.op("patch", "patch", text, (*_WRITE, _FORCE), changed, _PATCH, suffix=suffix)
        return replace(patch, body_types=_PATCH_TYPES)


_METHODS: Final = {
    "list": "get",
    "get": "get",
    "watch": "get",
    "watchlist": "get",
    "post": "post",
    "put": "put",
    "patch": "patch",
    "delete": "delete",
    "deletecollection": "delete",
}


def _resource_paths(resource: Resource) -> list[_Path]:
    """The paths of one resource, with their operations, for the verbs it allows."""
    namer = _Namer(resource)
    prefix = resource.path().rsplit("/", 1)[0]
    scoped = f"{prefix}/namespaces/{{namespace}}" if resource.namespaced else prefix
    scope_params: tuple[_Param, ...] = (_NAMESPACE,) if resource.namespaced else ()
    item_path = f"{scoped}/{resource.plural}/{{name}}"
    paths: list[_Path] = [
        (f"{scoped}/{resource.plural}", scope_params, _collection_operations(namer)),
        (item_path, (_NAME, *scope_params), _item_operations(namer)),
    ]
    if resource.namespaced and "list" in resource.verbs:
        every = replace(namer.list(), operation_id=f"list{_id_part(resource)}{resource.kind}ForAllNamespaces")
        paths.append((f"{prefix}/{resource.plural}", (), (every,)))
    if "watch" in resource.verbs:
        paths += _watch_paths(namer, prefix, scope_params)
    paths += [_subresource_path(namer, item_path, name, scope_params) for name in resource.subresources]
    return [path for path in paths if path[2]]


def _collection_operations(namer: _Namer) -> tuple[_Operation, ...]:
    kind, verbs = namer.resource.kind, namer.resource.verbs
    item = kind_definition_name(namer.resource)
    created = (("200", item), ("201", item), ("202", item))
    operations: dict[str, Callable[[], _Operation]] = {
        "list": namer.list,
        "create": lambda: namer.op("create", "post", f"create a {kind}", _WRITE, created, item),
        "deletecollection": lambda: namer.op(
            "delete",
            "deletecollection",
            f"delete collection of {kind}",
            _DELETE + _LIST,
            (("200", _STATUS),),
            _DELETE_OPTIONS,
            infix="Collection",
        ),
    }
    return tuple(build() for verb, build in operations.items() if verb in verbs)


def _item_operations(namer: _Namer) -> tuple[_Operation, ...]:
    kind, verbs = namer.resource.kind, namer.resource.verbs
    item = kind_definition_name(namer.resource)
    operations: dict[str, Callable[[], _Operation]] = {
        "get": lambda: namer.op("read", "get", f"read the specified {kind}", (), (("200", item),)),
        "update": lambda: namer.op(
            "replace", "put", f"replace the specified {kind}", _WRITE, (("200", item), ("201", item)), item
        ),
        "patch": lambda: namer.patch(f"partially update the specified {kind}"),
        "delete": lambda: namer.op(
            "delete", "delete", f"delete a {kind}", _DELETE, (("200", item), ("202", item)), _DELETE_OPTIONS
        ),
    }
    return tuple(build() for verb, build in operations.items() if verb in verbs)


def _watch_paths(namer: _Namer, prefix: str, scope_params: tuple[_Param, ...]) -> list[_Path]:
    """The deprecated `/watch/` paths upstream still serves."""
    r, kind = namer.resource, namer.resource.kind
    watched = f"{prefix}/watch/namespaces/{{namespace}}" if r.namespaced else f"{prefix}/watch"
    answers = (("200", _WATCH_EVENT),)
    deprecated = "deprecated: use the 'watch' parameter with a list operation instead"
    one = namer.op(
        "watch", "watch", f"watch changes to an object of kind {kind}. {deprecated}.", _LIST, answers
    )
    many = namer.op(
        "watch",
        "watchlist",
        f"watch individual changes to a list of {kind}. {deprecated}.",
        _LIST,
        answers,
        suffix="List",
    )
    paths: list[_Path] = [
        (f"{watched}/{r.plural}", scope_params, (many,)),
        (f"{watched}/{r.plural}/{{name}}", (_NAME, *scope_params), (one,)),
    ]
    if r.namespaced:
        every = replace(many, operation_id=f"watch{_id_part(r)}{kind}ListForAllNamespaces")
        paths.append((f"{prefix}/watch/{r.plural}", (), (every,)))
    return paths


def _subresource_path(
    namer: _Namer, item_path: str, subresource: str, scope_params: tuple[_Param, ...]
) -> _Path:
    kind = namer.resource.kind
    item = kind_definition_name(namer.resource)
    params = (_NAME, *scope_params)
    if subresource == "log":
        log = namer.op(
            "read", "get", f"read log of the specified {kind}", _LOG, (("200", _STRING_BODY),), suffix="Log"
        )
        return (
            f"{item_path}/log",
            params,
            (replace(log, produces=("text/plain", "application/json", "application/yaml")),),
        )
    if subresource == "eviction":
        created = (("200", _EVICTION), ("201", _EVICTION), ("202", _EVICTION))
        evict = namer.op(
            "create", "post", f"create eviction of a {kind}", _WRITE, created, _EVICTION, suffix="Eviction"
        )
        return (f"{item_path}/eviction", params, (replace(evict, gvk=_EVICTION_GVK),))
    # Read only, as discovery says (see discovery._SUBRESOURCES).
    read = namer.op(
        "read", "get", f"read status of the specified {kind}", (), (("200", item),), suffix="Status"
    )
    return (f"{item_path}/status", params, (read,))


_EVICTION_GVK: Final = {"group": "policy", "kind": "Eviction", "version": "v1"}


def _all_paths(resources: list[Resource] | tuple[Resource, ...]) -> list[_Path]:
    return [path for resource in resources for path in _resource_paths(resource)]


def _v2_param(param: _Param) -> Schema:
    rendered: Schema = {
        "name": param.name,
        "in": param.location,
        "description": param.description,
        "type": param.kind,
    }
    if param.location == "path":
        rendered["required"] = True
    elif param.kind == "string":
        rendered["uniqueItems"] = True
    return rendered


def _v3_param(param: _Param) -> Schema:
    schema: Schema = {"type": param.kind}
    if param.location != "path" and param.kind == "string":
        schema["uniqueItems"] = True
    rendered: Schema = {
        "name": param.name,
        "in": param.location,
        "description": param.description,
        "schema": schema,
    }
    if param.location == "path":
        rendered["required"] = True
    return rendered


def _answer_schema(name: str, v3: bool) -> Schema:
    if name == _STRING_BODY:
        return {"type": "string"}
    return {"$ref": f"#/components/schemas/{name}" if v3 else f"#/definitions/{name}"}


def _v2_operation(operation: _Operation) -> Schema:
    params = [_v2_param(param) for param in operation.params]
    if operation.body:
        params.insert(
            0,
            {"name": "body", "in": "body", "required": True, "schema": _answer_schema(operation.body, False)},
        )
    rendered: Schema = {
        "description": operation.description,
        "consumes": list(operation.body_types),
        "produces": list(operation.produces),
        "schemes": ["https"],
        "tags": [_tag(operation.gvk)],
        "operationId": operation.operation_id,
        "parameters": params,
        "responses": {
            code: {"description": _REASONS[code], "schema": _answer_schema(name, False)}
            for code, name in operation.answers
        }
        | {"401": {"description": "Unauthorized"}},
    }
    if not params:
        del rendered["parameters"]
    return rendered | _extensions(operation)


def _v3_operation(operation: _Operation) -> Schema:
    rendered: Schema = {
        "tags": [_tag(operation.gvk)],
        "description": operation.description,
        "operationId": operation.operation_id,
    }
    if operation.params:
        rendered["parameters"] = [_v3_param(param) for param in operation.params]
    if operation.body:
        schema = _answer_schema(operation.body, True)
        rendered["requestBody"] = {
            "content": {media: {"schema": schema} for media in operation.body_types},
            "required": True,
        }
    rendered["responses"] = {
        code: {
            "description": _REASONS[code],
            "content": {media: {"schema": _answer_schema(name, True)} for media in operation.produces},
        }
        for code, name in operation.answers
    } | {"401": {"description": "Unauthorized"}}
    return rendered | _extensions(operation)


_REASONS: Final = {"200": "OK", "201": "Created", "202": "Accepted"}


def _tag(gvk: dict[str, str]) -> str:
    group = gvk["group"].split(".")[0] if gvk["group"] else "core"
    return f"{group}_{gvk['version']}"


def _extensions(operation: _Operation) -> Schema:
    return {"x-kubernetes-action": operation.action, "x-kubernetes-group-version-kind": dict(operation.gvk)}


def _v2_paths(paths: list[_Path]) -> Schema:
    return {
        path: {op.method: _v2_operation(op) for op in operations}
        | {"parameters": [_v2_param(param) for param in (*params, _PRETTY)]}
        for path, params, operations in paths
    }


def _v3_paths(paths: list[_Path]) -> Schema:
    return {
        path: {op.method: _v3_operation(op) for op in operations}
        | {"parameters": [_v3_param(param) for param in (*params, _PRETTY)]}
        for path, params, operations in paths
    }


@cache
def openapi_v2() -> dict[str, Any]:
    """`/openapi/v2`: every served resource's paths and every definition, as one swagger 2.0 document."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": _v2_paths(_all_paths(RESOURCES)),
        "definitions": kind_definitions(),
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "type": "apiKey",
                "name": "authorization",
                "in": "header",
            }
        },
        "security": [{"BearerToken": []}],
    }


def v3_path(group: str, version: str) -> str:
    """The index key of a group version's v3 document: `api/v1`, `apis/batch/v1`."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _served_group_versions() -> list[tuple[str, str]]:
    return list(dict.fromkeys((resource.group, resource.version) for resource in RESOURCES))


def openapi_v3_index(base_hash: str = "") -> dict[str, Any]:
    """`/openapi/v3`: where each group version's document is, its URL carrying the document's hash (mixed
    with `base_hash`, e.g. the server's build) so that clients cache it for as long as it is unchanged."""
    return {
        "paths": {
            v3_path(group, version): {
                "serverRelativeURL": f"/openapi/v3/{v3_path(group, version)}?hash={openapi_v3_hash(group, version, base_hash)}"
            }
            for group, version in _served_group_versions()
        }
    }


def openapi_v3_hash(group: str, version: str, base_hash: str = "") -> str:
    """The hash of a group version's v3 document, as `?hash=` names it ("" for an unserved one)."""
    return _document_hash(group, version, base_hash)


@cache
def _document_hash(group: str, version: str, base_hash: str) -> str:
    document = openapi_v3_document(group, version)
    if document is None:
        return ""
    body = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha512(f"{base_hash}\n{body}".encode()).hexdigest().upper()


@cache
def openapi_v3_document(group: str, version: str) -> dict[str, Any] | None:
    """`/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`: the group version's paths and every
    schema they refer to, directly or not (the document stands alone); None for an unserved one."""
    served = in_group_version(group, version)
    if not served:
        return None
    paths = _v3_paths(_all_paths(served))
    definitions = kind_definitions()
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {
            "schemas": {name: _to_v3(definitions[name]) for name in sorted(_reachable(paths, definitions))},
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                }
            },
        },
    }


def _to_v3(schema: Any) -> Any:
    """A v2 schema in v3's spelling: refs under components, a ref with siblings (a description) wrapped in
    `allOf` as kube-openapi does."""
    if isinstance(schema, list):
        return [_to_v3(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _to_v3(value) for key, value in schema.items() if key != "$ref"}
    target = schema.get("$ref")
    if target is None:
        return converted
    v3_ref = {"$ref": target.replace("#/definitions/", "#/components/schemas/")}
    return {"allOf": [v3_ref], **converted} if converted else v3_ref


def _refs(value: Any) -> set[str]:
    # The definition names a JSON value refers to, anywhere inside it.
    if isinstance(value, dict):
        found = {value["$ref"].rpartition("/")[2]} if isinstance(value.get("$ref"), str) else set()
        return found.union(*(_refs(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_refs(item) for item in value))
    return set()


def _reachable(paths: Schema, definitions: dict[str, Schema]) -> set[str]:
    # Kinds and lists are reached through the paths; DeleteOptions and Status through their operations.
    seen: set[str] = set()
    pending = _refs(paths)
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending |= _refs(definitions[name]) - seen
    return seen
