"""The `Status` objects the Kubernetes API server answers a failed request with, worded as
`k8s.io/apimachinery/pkg/api/errors` and the apiserver's handlers word them.

Invalid objects, stale writes, bad requests and internal errors reuse `libs.api.errors`; this module adds
the answers that name a resource (`pods`, `jobs.batch`) rather than a kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from libs.api import errors
from libs.api.errors import FieldError

MODIFIED: Final = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
"""The detail of a write whose resourceVersion is stale (`registry/generic/registry/store.go`)."""

INVALID_PATCH_MESSAGE: Final = "the server rejected our request due to an error in our request"
"""The message of `NewGenericServerResponse(422, ...)`, how a JSON patch that does not apply is answered."""


def qualified(resource: str, group: str) -> str:
    """`schema.GroupResource.String()`: `pods`, `jobs.batch`."""
    return f"{resource}.{group}" if group else resource


def failure(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `Status` of status Failure; `details` only when the API server sends them."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        status["details"] = details
    status["code"] = code
    return status


def _details(resource: str, group: str, name: str = "") -> dict[str, Any]:
    """`StatusDetails` as Go serialises it: empty fields omitted, in the struct's order."""
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return details


def not_found(resource: str, group: str, name: str) -> dict[str, Any]:
    """404 NotFound: `pods "x" not found`."""
    message = f'{qualified(resource, group)} "{name}" not found'
    return failure(404, "NotFound", message, _details(resource, group, name))


def already_exists(resource: str, group: str, name: str) -> dict[str, Any]:
    """409 AlreadyExists: `pods "x" already exists`."""
    message = f'{qualified(resource, group)} "{name}" already exists'
    return failure(409, "AlreadyExists", message, _details(resource, group, name))


def conflict(kind: str, name: str, detail: str = MODIFIED) -> dict[str, Any]:
    """409 Conflict: `Operation cannot be fulfilled on pods "x": the object has been modified; ...`."""
    return errors.conflict_status(kind, name, detail)


def invalid(kind: str, name: str, field_errors: Sequence[FieldError]) -> dict[str, Any]:
    """422 Invalid: `Pod "x" is invalid: spec.containers: Required value`."""
    return errors.to_status(kind, name, field_errors)


def bad_request(message: str) -> dict[str, Any]:
    """400 BadRequest with the message as given (`NewBadRequest`)."""
    return errors.bad_request_status(message)


def internal_error(message: str) -> dict[str, Any]:
    """500 InternalError."""
    return errors.internal_error_status(message)


def unknown_error(message: str) -> dict[str, Any]:
    """500 with reason Unknown: how the apiserver answers an error that is not a Status
    (`responsewriters.ErrorToAPIStatus`). `StatusReasonUnknown` is the empty string, which the JSON leaves
    out (kubectl then prints `Error from server: ...` with no reason)."""
    answer = failure(500, "", message)
    del answer["reason"]
    return answer


def invalid_patch() -> dict[str, Any]:
    """422 Invalid with empty details: a JSON patch that does not apply (`NewGenericServerResponse`)."""
    return failure(422, "Invalid", INVALID_PATCH_MESSAGE, {})


def method_not_allowed(resource: str, group: str, action: str) -> dict[str, Any]:
    """405 MethodNotAllowed (`NewMethodNotSupported`): `create is not supported on resources of kind "events"`."""
    message = f'{action} is not supported on resources of kind "{qualified(resource, group)}"'
    return failure(405, "MethodNotAllowed", message, _details(resource, group))


def unsupported_media_type(accepted: Sequence[str]) -> dict[str, Any]:
    """415 UnsupportedMediaType (`negotiation.NewUnsupportedMediaTypeError`)."""
    message = "the body of the request was in an unknown format - accepted media types include: " + ", ".join(
        accepted
    )
    return failure(415, "UnsupportedMediaType", message)


def not_acceptable(accepted: Sequence[str]) -> dict[str, Any]:
    """406 NotAcceptable (`negotiation.NewNotAcceptableError`)."""
    message = "only the following media types are accepted: " + ", ".join(accepted)
    return failure(406, "NotAcceptable", message)


def expired(requested: int, oldest: int) -> dict[str, Any]:
    """410 Expired: a watch or list from a resourceVersion the server no longer holds
    (`NewResourceExpired("too old resource version: 5 (12)")`)."""
    return failure(410, "Expired", f"too old resource version: {requested} ({oldest})")


def gone(message: str) -> dict[str, Any]:
    """410 Gone (`NewGone`)."""
    return failure(410, "Gone", message)


def request_entity_too_large(detail: str) -> dict[str, Any]:
    """413 RequestEntityTooLarge (`NewRequestEntityTooLargeError`)."""
    return failure(413, "RequestEntityTooLarge", f"Request entity too large: {detail}")


def unauthorized() -> dict[str, Any]:
    """401 Unauthorized, as the authentication filter answers a request without valid credentials."""
    return failure(401, "Unauthorized", "Unauthorized")


def forbidden_message(
    user: str, verb: str, resource: str, group: str, namespace: str, subresource: str = ""
) -> str:
    """The authorizer's refusal (`responsewriters.forbiddenMessage`)."""
    shown = f"{resource}/{subresource}" if subresource else resource
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return f'User "{user}" cannot {verb} resource "{shown}" in API group "{group}" {where}'


def forbidden(
    user: str,
    verb: str,
    resource: str,
    group: str,
    namespace: str = "",
    name: str = "",
    subresource: str = "",
) -> dict[str, Any]:
    """403 Forbidden (`NewForbidden` around `forbiddenMessage`): `pods is forbidden: User "viewer" cannot
    create resource "pods" in API group "" in the namespace "default"`."""
    detail = forbidden_message(user, verb, resource, group, namespace, subresource)
    target = qualified(resource, group)
    message = f'{target} "{name}" is forbidden: {detail}' if name else f"{target} is forbidden: {detail}"
    return failure(403, "Forbidden", message, _details(resource, group, name))


def apply_conflict(message: str, causes: Sequence[dict[str, str]]) -> dict[str, Any]:
    """409 Conflict of a server-side apply (`NewApplyConflict`): the causes name each contested field."""
    return failure(409, "Conflict", message, {"causes": list(causes)})
