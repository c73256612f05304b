"""Objects as the Kubernetes API shows them: resourceVersion is the revision, lists carry theirs, and
selectors filter what admission returned."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from libs.kubeapi.resources import Resource
from libs.kubeapi.versions import as_served

Matcher = Callable[[dict[str, Any]], bool]


def shown(manifest: dict[str, Any], revision: int) -> dict[str, Any]:
    """The object with its revision as `metadata.resourceVersion` (admission's own counter is per object)."""
    metadata = {**(manifest.get("metadata") or {}), "resourceVersion": str(revision)}
    return {**manifest, "metadata": metadata}


def object_list(
    resource: Resource, items: list[dict[str, Any]], revision: int, token: str | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if token:
        metadata["continue"] = token
    return {
        "kind": resource.list_kind_name,
        "apiVersion": resource.api_version,
        "metadata": metadata,
        "items": [as_served(resource, item) for item in items],
    }


def continue_token(admission_token: str, revision: int) -> str:
    """The list's continue token: where admission's page ended and the revision of the first page."""
    raw = json.dumps({"a": admission_token, "rv": revision}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def read_continue(token: str) -> tuple[str, int]:
    """(admission's token, the first page's revision); ValueError when the token is not one of ours."""
    padded = token + "=" * (-len(token) % 4)
    data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    if not isinstance(data, dict) or not isinstance(data.get("a"), str):
        raise ValueError("not a continue token")
    return data["a"], int(data.get("rv") or 0)


def parse_revision(text: str | None) -> int | None:
    """A resourceVersion given by a client: None when absent or empty; ValueError when not a revision."""
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise ValueError(text)
    value = int(text)
    if not 0 <= value < 2**63:  # the database keeps revisions in 64 bits
        raise ValueError(text)
    return value
