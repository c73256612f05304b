"""The scheduler's cluster snapshot: free capacity per node and per topology domain, kept incrementally."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, TypeVar

from .capacity import (
    NodeState,
    NodeTally,
    build_level,
    charge_existing,
    fill_domain,
    give_back,
    give_back_many,
    move_domain,
    node_counts,
    take,
)
from .claims import ClaimsView
from .model import (
    CPU_DIMENSION,
    DEFAULT_TOPOLOGY_KEYS,
    CycleDecision,
    Node,
    NodeAssignment,
    Placement,
    PodRequest,
    ResourceTotals,
)
from .nesting import Nesting
from .topology import DomainIndex, NestedNodeIndex, NodeIndex, TopologyDomain, TopologyLevel

_T = TypeVar("_T")
_uid_of = itemgetter(0)
_node_of = itemgetter(2)
_pod_count_of = itemgetter(1)


class PlacementConflict(ValueError):
    """A placement no longer fits its node (resources gone, device taken, pod already placed)."""


class ClusterSnapshot:
    """Free capacity of every node and of every topology domain, updated incrementally.

    Nodes come and go with `add_node` / `update_node` / `remove_node`; pods take and give back capacity with
    `assume` / `apply` (a cycle's decision) / `bind` and `forget` / `unbind`, each touching only the node
    concerned and its domains, so a cycle never rebuilds the world. Aggregates are kept for
    `topology_keys` (broadest first) and for any other key a PodGroup asks for, from its first use on.
    `extended_resource_names` maps a DeviceClass to its `extendedResourceName` for messages
    (`Insufficient nvidia.com/gpu`). `version` counts changes, so derived values can be memoized.

    The node and domain indexes are settled when read (a change only notes what moved), and from the first
    unschedulable cycle on a `NodeTally` counts the nodes by free amount, so that its diagnosis does not
    walk the nodes.
    """

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        *,
        topology_keys: Sequence[str] = DEFAULT_TOPOLOGY_KEYS,
        extended_resource_names: Mapping[str, str] | None = None,
    ) -> None:
        self.topology_keys = tuple(topology_keys)
        self.extended_resource_names = dict(extended_resource_names or {})
        self._nodes: dict[str, NodeState] = {}
        self._levels: dict[str, TopologyLevel] = {}
        self._cluster_level = TopologyLevel("")
        self._cluster = self._cluster_level.domains[""] = TopologyDomain("", "", self._cluster_level)
        self._pods: dict[str, Placement] = {}
        self._bound: set[str] = set()
        self._ranks: dict[tuple[str, ...], dict[str, int]] = {}
        self._tally: NodeTally | None = None
        self._decided: tuple[CycleDecision, int] | None = None
        self.version = 0
        self.node_generation = 0
        """Counts nodes added, removed or replaced: what `watch_nodes` does not report."""
        self.claims: ClaimsView | None = None
        """The DRA device inventory and allocations, when pods may have claims."""
        self._memo: dict[Hashable, Any] = {}
        self._memo_version = 0
        self._nested: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
        self._nested_generation = -1
        self._build(nodes)

    # -- bulk build ---------------------------------------------------------------------------------

    def _build(self, nodes: Iterable[Node]) -> None:
        states: list[NodeState] = []
        for node in nodes:
            if node.name in self._nodes:
                raise ValueError(f"duplicate node {node.name}")
            state = self._nodes[node.name] = NodeState(node, self._ranks)
            states.append(state)
        fill_domain(self._cluster, states)
        for key in self.topology_keys:
            self._levels[key] = build_level(key, states)

    # -- reads --------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_name: object) -> bool:
        return node_name in self._nodes

    def node_state(self, name: str) -> NodeState:
        return self._nodes[name]

    def node_states(self) -> Iterable[NodeState]:
        return self._nodes.values()

    @property
    def nodes_by_name(self) -> Mapping[str, NodeState]:
        return self._nodes

    @property
    def cluster(self) -> TopologyDomain:
        """The whole cluster as one domain (no topology constraint)."""
        return self._cluster

    def level(self, key: str) -> TopologyLevel:
        """The domains of a topology key; a key first asked for here is aggregated now and kept from then on."""
        level = self._levels.get(key)
        if level is None:
            level = self._levels[key] = build_level(key, self._nodes.values())
        return level

    def node_index(self, domain: TopologyDomain, dimension: str) -> NodeIndex | NestedNodeIndex | None:
        """The domain's nodes bucketed by free count of a dimension, indexed for its whole level on first use.

        The level above the narrowest topology key (blocks, over racks) reads its nodes through the
        narrowest level's indexes while its domains are made of whole domains of that level."""
        index = domain.node_index.get(dimension)
        if index is None and dimension not in domain.level.node_dimensions:
            self._index_nodes(domain.level, dimension)
            index = domain.node_index.get(dimension)
        return index

    def domain_index(self, level: TopologyLevel, dimension: str) -> DomainIndex:
        """A level's domains bucketed by free count of a dimension, indexed on first use."""
        index = level.index.get(dimension)
        if index is None:
            entries = ((value, domain.count(dimension)) for value, domain in level.domains.items())
            index = DomainIndex.build(entries)
            index.dimension = dimension
            level.index_domains(index)
        return index

    def node_tally(self) -> NodeTally:
        """Every node counted by free amount per resource (see `NodeTally`), kept from its first use on."""
        if self._tally is None:
            self._tally = NodeTally(self._nodes.values())
        return self._tally

    def _index_nodes(self, level: TopologyLevel, dimension: str) -> None:
        finer = self._finer_level(level)
        if finer is not None and level.nesting is None:
            level.nesting = Nesting.of(level.key, finer.key, self._nodes.values())
        if finer is not None and level.nesting is not None:
            self._nest_nodes(level, finer, level.nesting, dimension)
            return
        level.node_dimensions.add(dimension)
        members: dict[str, list[NodeState]] = {value: [] for value in level.domains}
        for state in self._nodes.values():
            for domain in state.domains:
                if domain.level is level:
                    members[domain.value].append(state)
        for value, states in members.items():
            index = NodeIndex.build(node_counts(states, dimension))
            index.dimension = dimension
            level.domains[value].index_nodes(index)
        for states in members.values():
            for state in states:
                state.note_stale()

    def _finer_level(self, level: TopologyLevel) -> TopologyLevel | None:
        """The narrowest topology level, for the level just above it (None for any other)."""
        keys = self.topology_keys
        if len(keys) < 2 or level.key != keys[-2]:
            return None
        return self.level(keys[-1])

    def _nest_nodes(
        self, level: TopologyLevel, finer: TopologyLevel, nesting: Nesting, dimension: str
    ) -> None:
        """Give each domain of the level a node index read through those of the finer domains it holds."""
        if dimension not in finer.node_dimensions:
            self._index_nodes(finer, dimension)
        for value, parts in nesting.parts().items():
            indexes: list[NodeIndex] = []
            for part in parts:
                index = finer.domains[part].node_index[dimension]
                assert isinstance(index, NodeIndex)  # the narrowest level is never read through another
                indexes.append(index)
            level.domains[value].node_index[dimension] = NestedNodeIndex(dimension, indexes)
        level.node_dimensions.add(dimension)
        nesting.dimensions.add(dimension)

    def _renest(self, old: Mapping[str, str] | None, new: Mapping[str, str] | None) -> None:
        """Count a node's change of labels in the nestings; a nesting it changes is dropped, to be found
        again when next read."""
        for level in self._levels.values():
            nesting = level.nesting
            if nesting is not None and not nesting.keeps(old, new):
                self._unnest(level)

    def _unnest(self, level: TopologyLevel) -> None:
        nesting, level.nesting = level.nesting, None
        if nesting is None:
            return
        for dimension in nesting.dimensions:
            level.node_dimensions.discard(dimension)
            for domain in level.domains.values():
                domain.node_index.pop(dimension, None)

    def watch_nodes(self, changed: set[NodeState]) -> None:
        """From now on, put every node whose free capacity changes into `changed`, as the node indexes'
        stale sets are (nodes added, removed or replaced are counted in `node_generation` instead)."""
        self._cluster.stale.append(changed)
        for state in self._nodes.values():
            state.note_stale()

    def memoized(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """A value derived from the snapshot as it is now, computed once until the snapshot changes."""
        if self._memo_version != self.version:
            self._memo.clear()
            self._memo_version = self.version
        if key not in self._memo:
            self._memo[key] = compute()
        value: _T = self._memo[key]
        return value

    def values_inside(self, outer: str, value: str, inner: str) -> tuple[str, ...]:
        """The values of label `inner` among the nodes whose label `outer` is `value` (the racks of a block),
        sorted; kept until nodes are added, removed or relabelled."""
        if self._nested_generation != self.node_generation:
            self._nested.clear()
            self._nested_generation = self.node_generation
        table = self._nested.get((outer, inner))
        if table is None:
            found: dict[str, set[str]] = {}
            for state in self._nodes.values():
                labels = state.labels
                if outer in labels and inner in labels:
                    found.setdefault(labels[outer], set()).add(labels[inner])
            table = self._nested[(outer, inner)] = {key: tuple(sorted(vals)) for key, vals in found.items()}
        return table.get(value, ())

    def rank(self, key: str) -> int:
        """Position of a key among the configured levels, broadest first; other keys rank narrowest."""
        return self.topology_keys.index(key) if key in self.topology_keys else len(self.topology_keys)

    def extended_resource_name(self, device_class: str) -> str:
        return self.extended_resource_names.get(device_class, device_class)

    def node_free(self, name: str) -> ResourceTotals:
        return self._nodes[name].free()

    def domain_free(self, key: str, value: str) -> ResourceTotals | None:
        domain = self.level(key).domains.get(value)
        return None if domain is None else domain.free()

    def placement(self, pod_uid: str) -> Placement | None:
        return self._pods.get(pod_uid)

    def placements(self) -> Iterable[Placement]:
        return self._pods.values()

    def is_assumed(self, pod_uid: str) -> bool:
        """Whether the pod is placed but not yet bound (assumed by a cycle)."""
        return pod_uid in self._pods and pod_uid not in self._bound

    # -- nodes --------------------------------------------------------------------------------------

    def add_node(self, node: Node) -> None:
        """Add a node and its devices; its domains are created or grown."""
        self.version += 1
        self.node_generation += 1
        if node.name in self._nodes:
            raise ValueError(f"duplicate node {node.name}")
        self._renest(None, node.labels)
        state = self._nodes[node.name] = NodeState(node, self._ranks)
        self._join_all(state)

    def remove_node(self, name: str) -> tuple[Placement, ...]:
        """Remove a node; the placements of the pods that were on it are returned (those pods are lost)."""
        self.version += 1
        self.node_generation += 1
        state = self._nodes.pop(name)
        self._renest(state.labels, None)
        if self._tally is not None:
            self._tally.remove(state)
        for domain in list(state.domains):
            self._leave(state, domain)
        self._bound.difference_update(state.pod_uids)
        return tuple(self._pods.pop(uid) for uid in sorted(state.pod_uids))

    def update_node(self, node: Node) -> None:
        """Replace a node's labels, taints, allocatable resources or devices, keeping its pods on it."""
        self.version += 1
        self.node_generation += 1
        old = self._nodes.pop(node.name)
        self._renest(old.labels, node.labels)
        if self._tally is not None:
            self._tally.remove(old)
        for domain in list(old.domains):
            self._leave(old, domain)
        state = self._nodes[node.name] = NodeState(node, self._ranks)
        for uid in old.pod_uids:
            charge_existing(state, self._pods[uid])
        self._join_all(state)

    def _join_all(self, state: NodeState) -> None:
        if self._tally is not None:
            self._tally.add(state)
        self._join(state, self._cluster)
        for key, level in self._levels.items():
            value = state.labels.get(key)
            if value is not None:
                domain = level.domains.get(value)
                if domain is None:
                    domain = level.domains[value] = TopologyDomain(key, value, level)
                    for dimension in level.node_dimensions:
                        domain.index_nodes(NodeIndex(dimension))
                self._join(state, domain)
        state.note_stale()

    def _join(self, state: NodeState, domain: TopologyDomain) -> None:
        move_domain(domain, state, +1)
        state.domains.append(domain)
        for dimension, index in domain.node_index.items():
            if isinstance(index, NodeIndex) and (
                dimension == CPU_DIMENSION or dimension in state.free_devices
            ):
                index.place(state.name, state.count(dimension))

    def _leave(self, state: NodeState, domain: TopologyDomain) -> None:
        for index in domain.node_index.values():
            if isinstance(index, NodeIndex):
                index.discard(state.name)
                index.stale.discard(state)
        state.domains.remove(domain)
        move_domain(domain, state, -1)
        level = domain.level
        if domain.node_count == 0 and domain is not self._cluster:
            self._unnest_above(level)
            for domain_index in level.index.values():
                domain_index.discard(domain.value)
                domain_index.stale.discard(domain)
            del level.domains[domain.value]

    def _unnest_above(self, level: TopologyLevel) -> None:
        """A domain of `level` is gone: a level read through its node indexes is read so no longer."""
        keys = self.topology_keys
        if len(keys) >= 2 and level.key == keys[-1]:
            above = self._levels.get(keys[-2])
            if above is not None:
                self._unnest(above)

    # -- pods ---------------------------------------------------------------------------------------

    def apply(self, decision: CycleDecision) -> None:
        """Assume every placement of a cycle's decision; all or nothing (PlacementConflict if stale)."""
        decided = self._decided
        fresh = decided is not None and decided[0] is decision and decided[1] == self.version
        self._commit(decision.placements, decision.assignments, assumed=True, fits=fresh)

    def decided(self, decision: CycleDecision) -> None:
        """Note a placed decision a cycle has just computed on the snapshot as it is: applied before the
        snapshot changes, its nodes are known to hold it and are not checked again (its pods still are)."""
        self._decided = (decision, self.version)

    def assume(self, placement: Placement) -> None:
        """Assume one placement (capacity is taken until it is bound, forgotten or unbound)."""
        self._commit((placement,), (NodeAssignment.of((placement,)),), assumed=True)

    def forget(self, decision: CycleDecision) -> None:
        """Roll back the still-assumed placements of a decision, e.g. when DRA allocation failed."""
        for placement in decision.placements:
            if self.is_assumed(placement.pod_uid):
                self.unbind(placement.pod_uid)

    def confirm(self, decision: CycleDecision) -> None:
        """Mark the assumed placements of a decision as bound."""
        self._bound.update(
            placement.pod_uid for placement in decision.placements if placement.pod_uid in self._pods
        )

    def bind(
        self, pod: PodRequest, node_name: str, devices: Mapping[str, Sequence[str]] | None = None
    ) -> Placement:
        """Record a pod bound to a node (confirming it if it was assumed there).

        Without `devices`, the first free devices of each class the pod asks for are taken. Raises
        PlacementConflict if the node cannot hold the pod.
        """
        known = self._pods.get(pod.uid)
        if known is not None:
            if known.node_name != node_name:
                raise PlacementConflict(f"pod {pod.uid} is already on node {known.node_name}")
            self._bound.add(pod.uid)
            return known
        state = self._nodes[node_name]
        if devices is None:
            devices = {cls: state.free_devices.get(cls, [])[:count] for cls, count in pod.devices.items()}
            if any(len(devices[cls]) < count for cls, count in pod.devices.items()):
                raise PlacementConflict(f"node {node_name} has too few free devices for pod {pod.uid}")
        chosen = {cls: tuple(names) for cls, names in devices.items()}
        placement = Placement(pod.uid, pod.name, node_name, pod.cpu_milli, pod.memory, chosen)
        self._commit((placement,), (NodeAssignment.of((placement,)),), assumed=False)
        return placement

    def release_many(self, pod_uids: Iterable[str]) -> list[Placement]:
        """`unbind` for many pods, each node and its domains changed once: the placements released (of the
        pods that were placed), for `restore_many`. A preemptor's simulation takes its candidates out so."""
        released = [placement for uid in pod_uids if (placement := self._pods.pop(uid, None)) is not None]
        if not released:
            return released
        self.version += 1
        by_node: dict[str, list[Placement]] = {}
        for placement in released:
            self._bound.discard(placement.pod_uid)
            by_node.setdefault(placement.node_name, []).append(placement)
        for node_name, placements in by_node.items():
            state = self._nodes.get(node_name)
            if state is None:
                continue
            state.pod_uids.difference_update(placement.pod_uid for placement in placements)
            give_back_many(state, placements)
            if self._tally is not None:
                self._tally.update(state)
        return released

    def restore_many(self, placements: Sequence[Placement]) -> None:
        """Bind again placements `release_many` returned, all or nothing (PlacementConflict)."""
        if not placements:
            return
        ordered = sorted(placements, key=_node_of)
        runs: list[list[Placement]] = []
        for placement in ordered:
            if runs and runs[-1][0].node_name == placement.node_name:
                runs[-1].append(placement)
            else:
                runs.append([placement])
        self._commit(ordered, [NodeAssignment.of(run) for run in runs], assumed=False)

    def unbind(self, pod_uid: str) -> Placement | None:
        """Give back a pod's capacity (finished, evicted, or forgotten); None if the pod is unknown."""
        placement = self._pods.pop(pod_uid, None)
        if placement is None:
            return None
        self._bound.discard(pod_uid)
        state = self._nodes.get(placement.node_name)
        if state is not None:
            self._release(state, placement)
        return placement

    def _commit(
        self,
        placements: Sequence[Placement],
        assignments: Sequence[NodeAssignment],
        *,
        assumed: bool,
        fits: bool = False,
    ) -> None:
        """Take capacity for placements; a conflict raises PlacementConflict before anything changed.

        `fits` says the assignments were just computed against these nodes (see `decided`)."""
        # 1. Check, changing nothing: each node can hold what it is assigned, and its devices are free.
        merged = len(assignments) > 1 and len({a.node_name for a in assignments}) < len(assignments)
        if merged:
            assignments = _merged_by_node(assignments)
        if fits:
            nodes = self._nodes
            states = [nodes[assignment.node_name] for assignment in assignments]
        else:
            states = list(map(self._room_for, assignments))
            _check_coverage(placements, assignments, merged)
        # 2. Record the pods: a pod placed already, or twice, is a conflict.
        uids = self._record(placements)
        # 3. Change the nodes, and each run of nodes sharing their domains at once.
        self.version += 1
        take(states, assignments)
        if self._tally is not None:
            for state in states:
                self._tally.update(state)
        if len(states) == 1:
            states[0].pod_uids.update(uids)
        elif merged:
            for placement in placements:
                self._nodes[placement.node_name].pod_uids.add(placement.pod_uid)
        else:
            start = 0
            for state, assignment in zip(states, assignments, strict=True):
                state.pod_uids.update(uids[start : start + assignment.pod_count])
                start += assignment.pod_count
        if not assumed:
            self._bound.update(uids)

    def _room_for(self, assignment: NodeAssignment) -> NodeState:
        """The assignment's node, if it can hold the assignment's pods and its named devices are free."""
        node_name, count, cpu, memory, devices = assignment
        state = self._nodes.get(node_name)
        if state is None:
            raise PlacementConflict(f"node {node_name} is not in the snapshot")
        if state.free_cpu < cpu or state.free_memory < memory or state.free_pods < count:
            raise PlacementConflict(f"node {node_name} cannot hold {count} more pod(s)")
        for cls, names in devices.items():
            free = state.free_devices.get(cls)
            if free is not None and free[: len(names)] == [*names]:
                continue
            distinct = set(names)
            if free is None or len(distinct) != len(names) or not distinct <= set(free):
                raise PlacementConflict(f"node {node_name} has no free {cls} device(s) {', '.join(names)}")
        return state

    def _record(self, placements: Sequence[Placement]) -> list[str]:
        pods = self._pods
        uids = list(map(_uid_of, placements))
        if not pods.keys().isdisjoint(uids):
            raise PlacementConflict(f"pod(s) already placed: {', '.join(sorted(pods.keys() & set(uids)))}")
        size = len(pods)
        pods.update(zip(uids, placements, strict=True))
        if len(pods) != size + len(uids):
            for uid in uids:
                pods.pop(uid, None)
            raise PlacementConflict("a pod is placed twice")
        return uids

    def _release(self, state: NodeState, placement: Placement) -> None:
        self.version += 1
        state.pod_uids.discard(placement.pod_uid)
        give_back(state, placement)
        if self._tally is not None:
            self._tally.update(state)


def _merged_by_node(assignments: Sequence[NodeAssignment]) -> list[NodeAssignment]:
    """One assignment per node (a gang of several shapes may take one node twice)."""
    merged: dict[str, NodeAssignment] = {}
    for assignment in assignments:
        known = merged.get(assignment.node_name)
        if known is None:
            merged[assignment.node_name] = assignment
            continue
        devices = dict(known.devices)
        for cls, names in assignment.devices.items():
            devices[cls] = (*devices.get(cls, ()), *names)
        merged[assignment.node_name] = NodeAssignment(
            known.node_name,
            known.pod_count + assignment.pod_count,
            known.cpu_milli + assignment.cpu_milli,
            known.memory + assignment.memory,
            devices,
        )
    return list(merged.values())


def _check_coverage(
    placements: Sequence[Placement], assignments: Sequence[NodeAssignment], merged: bool
) -> None:
    """The assignments account for exactly the placements (consecutive runs, unless merged)."""
    if len(assignments) == 1:
        assignment = assignments[0]
        if assignment.pod_count == len(placements) > 0 and placements[0].node_name == assignment.node_name:
            return
    if sum(map(_pod_count_of, assignments)) != len(placements):
        raise PlacementConflict("the node assignments do not cover the placements")
    if merged:
        names = {assignment.node_name for assignment in assignments}
        if any(placement.node_name not in names for placement in placements):
            raise PlacementConflict("a placement names a node without an assignment")
        return
    start = 0
    for assignment in assignments:
        if assignment.pod_count and placements[start].node_name != assignment.node_name:
            raise PlacementConflict(f"placements do not start on node {assignment.node_name} at {start}")
        start += assignment.pod_count
