"""Served versions: an object as Podway stores it, shown in the version a request names. Writes in another
version are converted by admission on the way in (libs/api/conversion.py)."""

from __future__ import annotations

from typing import Any

from libs.api.conversion import workload_as_v1alpha1
from libs.api.scheduling_versions import as_v1beta1
from libs.kubeapi.events import as_events_v1
from libs.kubeapi.resources import Resource


def as_served(resource: Resource, stored: dict[str, Any]) -> dict[str, Any]:
    """`stored` in the resource's version, with its kind and apiVersion."""
    if resource.kind == "Workload" and resource.version == "v1alpha1":
        return workload_as_v1alpha1(stored)
    if resource.kind in ("Workload", "PodGroup") and resource.version in ("v1beta1", "v1alpha3"):
        return {**as_v1beta1(stored, resource.api_version), "kind": resource.kind}
    if resource.group == "events.k8s.io":
        return as_events_v1(stored)
    return {**stored, "kind": resource.kind, "apiVersion": resource.api_version}
