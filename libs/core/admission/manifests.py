"""Where each part of a manifest is stored: metadata, spec (or the top-level body of spec-less kinds such
as PriorityClass), status. One rule, used both ways."""

from __future__ import annotations

from typing import Any

from libs.core.admission.model import Manifest

ENVELOPE_FIELDS = ("apiVersion", "kind", "metadata", "status")
SPECLESS_KINDS = frozenset({"PriorityClass"})


def stored_spec(kind: str, manifest: Manifest) -> Manifest:
    """The part stored in the spec column."""
    if kind in SPECLESS_KINDS:
        return {k: v for k, v in manifest.items() if k not in ENVELOPE_FIELDS}
    spec: Manifest = manifest.get("spec") or {}
    return spec


def rebuild_manifest(
    kind: str, api_version: str, metadata: Manifest, spec: Manifest, status: Manifest
) -> Manifest:
    """The full manifest of a stored object."""
    manifest: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if kind in SPECLESS_KINDS:
        manifest.update(spec)
    else:
        manifest["spec"] = spec
    if status:
        manifest["status"] = status
    return manifest
