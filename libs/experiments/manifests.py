"""Podway manifests as a trace: a file or directory of YAML documents admitted offline, as `podway apply`
would store them, and replayed with every workload arriving at time 0.

Nodes, ResourceSlices, DeviceClasses and ResourceClaimTemplates form the cluster (a node list CSV may give
the nodes instead); Workloads, PodGroups, Pods and Jobs (expanded as admission expands them) are the
workload, each pod running for its `podway.io/run-seconds` once bound. PriorityClasses are admitted first,
so that priorities resolve as on a live stack.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from libs.api.manifests import load_documents
from libs.core.admission.apply import ApplyContext, admit_batch, prepare_batch
from libs.core.admission.model import AdmissionView
from libs.core.scheduling.objects import ApiObject
from libs.core.simulation.replay import Arrival, cluster_manifests

from .traces import TraceError, read_nodes

CLUSTER_KINDS = ("DeviceClass", "Node", "ResourceSlice", "ResourceClaimTemplate")
WORKLOAD_KINDS = ("Workload", "CompositePodGroup", "PodGroup", "Pod")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def is_manifest_trace(trace: str) -> bool:
    path = Path(trace)
    return path.is_dir() or path.suffix in (".yaml", ".yml")


def load_manifest_trace(trace: str, nodes: str | Path | None = None) -> tuple[list[ApiObject], list[Arrival]]:
    """The cluster's objects and one arrival at time 0 holding every workload object, in the order the
    scheduler reads them (Workloads, then PodGroups, then Pods)."""
    path = Path(trace)
    files = sorted(path.glob("*.y*ml")) if path.is_dir() else [path]
    docs: list[dict[str, Any]] = []
    for file in files:
        try:
            docs += load_documents(file.read_text())
        except (OSError, ValueError) as error:
            raise TraceError(f"{file}: {error}") from error
    if nodes is not None:
        docs = [doc for doc in docs if doc.get("kind") not in ("Node", "ResourceSlice")]
        docs += cluster_manifests(read_nodes(Path(nodes)))
    stored = admit_offline(docs)
    cluster = [obj for kind in CLUSTER_KINDS for obj in stored if obj.kind == kind]
    workload = tuple(obj for kind in WORKLOAD_KINDS for obj in stored if obj.kind == kind)
    if not any(obj.kind == "Node" for obj in cluster):
        raise TraceError(f"{trace}: no Node: give the nodes as manifests or with --nodes")
    return cluster, [Arrival(0.0, workload)]


def admit_offline(docs: list[dict[str, Any]]) -> list[ApiObject]:
    """Every document admitted by the admission core against an empty store; a refused one is an error
    in the API server's wording."""
    view = AdmissionView()
    counter = itertools.count(1)
    context = ApplyContext(now=EPOCH, new_uid=lambda: f"simulated-{next(counter):06d}", request_id="simulate")
    classes = [doc for doc in docs if doc.get("kind") == "PriorityClass"]
    others = [doc for doc in docs if doc.get("kind") != "PriorityClass"]
    for batch in (classes, others):
        if not batch:
            continue
        decision = admit_batch(prepare_batch(batch), view, context)
        refused = [result.message for result in decision.results if result.outcome == "rejected"]
        if refused:
            raise TraceError("\n".join(refused))
    return [
        ApiObject.from_manifest(known.manifest, uid=known.uid, resource_version=known.resource_version)
        for known in view.objects.values()
    ]
