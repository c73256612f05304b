"""What `podway report` shows, computed from a run's audit log (events as `podway events -o json` prints them):
GPU occupancy by rack over time, a Gantt of PodGroups, router traffic by deployment and tier with spillovers
and failovers, and each breaker's state over time. Pure: events in, series out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from libs.client.usage import RACK_LABEL, gpu_request

GPU_MARK = "gpu"  # a device class or driver with this in its name counts as GPUs
BREAKER_LEVEL = {"closed": 0, "half_open": 1, "open": 2}
RELEASING = ("pods.succeeded", "pods.failed", "pods.evicted")


@dataclass
class Segment:
    """One stretch of a PodGroup's life: waiting, placed, running or preempted."""

    state: str
    start: str
    end: str


@dataclass
class GroupRow:
    name: str  # NAMESPACE/NAME
    uid: str
    segments: list[Segment] = field(default_factory=list)
    marks: list[tuple[str, str]] = field(default_factory=list)  # (time, what): evictions, restarts


@dataclass
class RunReport:
    started: str | None = None
    ended: str | None = None
    racks: dict[str, int] = field(default_factory=dict)  # rack -> GPUs
    occupancy: dict[str, list[tuple[str, float]]] = field(default_factory=dict)  # rack -> (time, % used)
    groups: list[GroupRow] = field(default_factory=list)
    traffic: dict[str, list[str]] = field(default_factory=dict)  # "deployment (tier)" -> answer times
    moves: list[dict[str, Any]] = field(default_factory=list)  # spillovers and failovers
    breakers: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # deployment -> (time, level)
    events: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "ended": self.ended,
            "events": self.events,
            "racks": self.racks,
            "occupancy": self.occupancy,
            "groups": [
                {
                    "name": g.name,
                    "uid": g.uid,
                    "segments": [vars(s) for s in g.segments],
                    "marks": [{"at": at, "what": what} for at, what in g.marks],
                }
                for g in self.groups
            ],
            "traffic": self.traffic,
            "moves": self.moves,
            "breakers": self.breakers,
        }


class _Fleet:
    """Which node is in which rack, how many GPUs each holds, and what each pod holds where."""

    def __init__(self) -> None:
        self.rack_of: dict[str, str] = {}
        self.gpus_of_node: dict[str, int] = {}
        self.pod_gpus: dict[str, int] = {}  # pod uid -> GPUs asked (from its admission)
        self.held: dict[str, tuple[str, int]] = {}  # pod uid -> (rack, GPUs) while it holds them
        self.used: dict[str, int] = defaultdict(int)

    def rack_gpus(self) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for node, gpus in self.gpus_of_node.items():
            totals[self.rack_of.get(node, "-")] += gpus
        return dict(sorted(totals.items()))

    def bind(self, placement: Mapping[str, Any]) -> str | None:
        devices = placement.get("devices") or {}
        gpus = sum(len(names) for cls, names in devices.items() if GPU_MARK in cls)
        gpus = gpus or self.pod_gpus.get(str(placement.get("pod_uid")), 0)
        rack = self.rack_of.get(str(placement.get("node")), "-")
        uid = str(placement.get("pod_uid"))
        if uid in self.held or not gpus:
            return None
        self.held[uid] = (rack, gpus)
        self.used[rack] += gpus
        return rack

    def release(self, pod_uid: str) -> str | None:
        held = self.held.pop(pod_uid, None)
        if held is None:
            return None
        self.used[held[0]] -= held[1]
        return held[0]


def _admitted(fleet: _Fleet, payload: Mapping[str, Any]) -> None:
    obj = payload.get("object") or {}
    kind = payload.get("kind")
    if kind == "Node":
        labels = (obj.get("metadata") or {}).get("labels") or {}
        fleet.rack_of[str(payload.get("name"))] = labels.get(RACK_LABEL, "-")
    elif kind == "ResourceSlice":
        spec = obj.get("spec") or {}
        if GPU_MARK in str(spec.get("driver", "")):
            node = str(spec.get("nodeName"))
            fleet.gpus_of_node[node] = len(spec.get("devices") or [])
    elif kind == "Pod":
        fleet.pod_gpus[str(payload.get("uid"))] = gpu_request(obj)


class _Gantt:
    def __init__(self) -> None:
        self.rows: dict[str, GroupRow] = {}
        self.state: dict[str, tuple[str, str]] = {}  # uid -> (state, since)

    def admit(self, payload: Mapping[str, Any], at: str) -> None:
        uid = str(payload.get("uid"))
        if uid not in self.rows:
            name = f"{payload.get('namespace')}/{payload.get('name')}"
            incarnations = sum(1 for row in self.rows.values() if row.name.split(" #")[0] == name)
            # A PodGroup applied again after it was deleted is a new one (new uid): a row of its own.
            self.rows[uid] = GroupRow(f"{name} #{incarnations + 1}" if incarnations else name, uid)
            self.state[uid] = ("waiting", at)

    def move(self, uid: str | None, state: str, at: str) -> None:
        if uid is None or uid not in self.rows:
            return
        current, since = self.state[uid]
        if current == state:
            return
        if since != at:
            self.rows[uid].segments.append(Segment(current, since, at))
        self.state[uid] = (state, at)

    def mark(self, uid: str | None, at: str, what: str) -> None:
        if uid is not None and uid in self.rows:
            self.rows[uid].marks.append((at, what))

    def close(self, at: str) -> list[GroupRow]:
        for uid, (state, since) in self.state.items():
            row = self.rows[uid]
            if state not in ("done", "deleted") and since != at:
                row.segments.append(Segment(state, since, at))
            if not row.segments:  # admitted and gone at once: still a row, an instant long
                row.segments.append(Segment("waiting", since, since))
        return list(self.rows.values())


def plot_time(value: object) -> str:
    """`2026-12-01T19:42:02.130355Z` -> `2026-12-01 19:42:02.130355`: the form plotting libraries read as UTC
    wall time, whatever the viewer's time zone."""
    text = str(value).replace("T", " ")
    return text[:-6] if text.endswith("+00:00") else text.rstrip("Z")


def _group_uid(payload: Mapping[str, Any]) -> str | None:
    group = payload.get("podgroup")
    return str(group["uid"]) if isinstance(group, Mapping) and group.get("uid") else None


def build_report(events: Iterable[Mapping[str, Any]]) -> RunReport:
    """The report of a run from its audit log, in `seq` order."""
    report = RunReport()
    fleet = _Fleet()
    gantt = _Gantt()
    occupancy: dict[str, list[tuple[str, float]]] = defaultdict(list)
    pending_of_group: dict[str, int] = {}

    def record(rack: str | None, at: str) -> None:
        if rack is None:
            return
        total = fleet.rack_gpus().get(rack, 0)
        occupancy[rack].append((at, round(100.0 * fleet.used[rack] / total, 1) if total else 0.0))

    for event in events:
        at, kind = plot_time(event.get("occurred_at")), str(event.get("type"))
        payload = event.get("payload") or {}
        report.events += 1
        report.started = report.started or at
        report.ended = at
        if kind.endswith(".admitted") or kind in ("node.registered", "resourceslice.published"):
            _admitted(fleet, payload)
            if kind == "podgroup.admitted":
                gantt.admit(payload, at)
        elif kind == "pods.bound":
            group = _group_uid(payload)
            for placement in payload.get("pods") or []:
                record(fleet.bind(placement), at)
            gantt.move(group, "placed", at)
            if group:
                pending_of_group[group] = len(payload.get("pods") or [])
        elif kind == "pods.running":
            group = (event.get("subject") or {}).get("uid") or _group_uid(payload)
            gantt.move(group, "running", at)
        elif kind in RELEASING:
            group = _group_uid(payload) or (event.get("subject") or {}).get("uid")
            for pod in payload.get("pods") or []:
                record(fleet.release(str(pod.get("uid"))), at)
            if kind == "pods.evicted":
                gantt.mark(group, at, f"evicted: {payload.get('reason')}")
                gantt.move(group, "preempted" if "Preempt" in str(payload.get("reason")) else "waiting", at)
            else:
                gantt.move(group, "done", at)
        elif kind == "object.deleted" and payload.get("kind") == "Pod":
            record(fleet.release(str(payload.get("uid"))), at)
        elif kind == "object.deleted" and payload.get("kind") == "PodGroup":
            gantt.move(str(payload.get("uid")), "deleted", at)
        elif kind == "podgroup.restarted":
            gantt.mark(str(payload.get("podgroup", {}).get("uid")), at, f"restarted: {payload.get('reason')}")
        elif kind == "inference.completed":
            key = (
                f"{payload.get('deployment')} ({payload.get('served_tier') or payload.get('requested_tier')})"
            )
            report.traffic.setdefault(key, []).append(at)
        elif kind in ("router.spillover", "router.failover"):
            report.moves.append(
                {
                    "at": at,
                    "kind": kind.split(".")[1],
                    "from": payload.get("from_deployment"),
                    "to": payload.get("to_deployment"),
                    "reason": payload.get("reason"),
                }
            )
        elif kind.startswith("router.breaker."):
            deployment = str(payload.get("deployment"))
            series = report.breakers.setdefault(deployment, [])
            if not series:
                series.append((report.started or at, BREAKER_LEVEL.get(str(payload.get("from_state")), 0)))
            series.append((at, BREAKER_LEVEL.get(str(payload.get("to_state")), 0)))
    report.racks = fleet.rack_gpus()
    report.occupancy = {rack: occupancy.get(rack, []) for rack in report.racks if rack in occupancy}
    report.groups = gantt.close(report.ended or "")
    for series in report.breakers.values():
        if report.ended and series[-1][0] != report.ended:
            series.append((report.ended, series[-1][1]))
    return report
