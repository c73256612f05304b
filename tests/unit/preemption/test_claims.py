"""Preemption of pods whose devices come from ResourceClaims: what a victim frees is what its claims hold
(whole devices picked by a CEL selector, shares of a shareable GPU), the preemptor's claims are allocated
on it, a victim whose devices would not serve them is never evicted, and the search leaves the snapshot
and the claim allocations as it found them; over random holders, no victim could be spared."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.cluster.generator import ClusterShape, generate_cluster
from libs.core.preemption import (
    NominationEndReason,
    Preempted,
    PreemptionReason,
    Preemptor,
    PreemptorStateMachine,
    find_victims,
)
from libs.core.scheduling import PodPhase, SchedulerStateMachine, schedule_podgroup
from libs.core.scheduling.inputs import (
    ClaimsAllocated,
    ClaimsHeld,
    Nominated,
    ObjectStored,
    PodsBound,
    PodsEvicted,
    PodsFinished,
    World,
)
from libs.core.scheduling.objects import ApiObject
from libs.core.scheduling.outputs import Binding, CycleRan
from tests.unit.scheduling.manifests import (
    FABRIC_CLASS,
    GPU_CLASS,
    RACK_FABRIC_TEMPLATE,
    gang,
    pod,
    podgroup,
    stored,
    workload,
)

NOW = 1_000.0
H200, A100 = "zone-0-b0-r0-n00", "zone-0-b0-r0-n01"
"""Two nodes of 8 GPUs, the last of each shareable (1 core); the second node's GPUs are A100s."""
CLASS = "gpu.example.com"
SHARED = f"{CLASS}/{H200}/gpu-7"
HOST = "kubernetes.io/hostname"
SHARE_CORES = ("200m", "300m", "500m")
FABRIC = [{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}]


def fleet(racks: int = 1) -> list[ApiObject]:
    """`racks` racks of the two nodes above; each rack's fabric device serves one PodGroup at a time."""
    shape = ClusterShape(blocks=1, racks_per_block=racks, nodes_per_rack=2, shared_gpus_per_node=1)
    docs = generate_cluster(shape)
    for doc in docs:
        if doc["kind"] == "ResourceSlice" and doc["spec"].get("nodeName") == A100:
            for device in doc["spec"]["devices"]:
                device["attributes"]["model"] = {"string": "A100"}
        if doc["kind"] == "ResourceSlice" and doc["spec"]["driver"] == "fabric.example.com":
            for device in doc["spec"]["devices"]:
                device.pop("allowMultipleAllocations")
    return [stored(doc) for doc in [GPU_CLASS, FABRIC_CLASS, RACK_FABRIC_TEMPLATE, *docs]]


def template(name: str, *, count: int = 1, model: str | None = None, cores: str | None = None) -> ApiObject:
    exactly: dict[str, Any] = {"deviceClassName": CLASS, "count": count}
    if model:
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{CLASS}"].model == "{model}"'}}]
    if cores:
        exactly["capacity"] = {"requests": {"cores": cores}}
    request = {"name": "gpus", "exactly": exactly}
    return stored(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        }
    )


def claiming(name: str, template_name: str, **pod_args: Any) -> ApiObject:
    claims = [{"name": "gpus", "resourceClaimTemplateName": template_name}]
    return pod(name, gpus=0, cpu="1", memory="1Gi", claims=claims, **pod_args)


class Pair:
    """A scheduler and a preemptor told the same things; the preemptor also hears what the DRA allocator
    committed (`claims.allocated`) and what the scheduler bound."""

    def __init__(self, racks: int = 1) -> None:
        world = World([*fleet(racks), workload()], {})
        self.scheduler = SchedulerStateMachine()
        self.scheduler.load(world, now=NOW)
        self.preemptor = PreemptorStateMachine()
        self.preemptor.load(world, now=NOW)
        self.now = NOW

    def admit(self, *objects: ApiObject) -> None:
        for obj in objects:
            for machine in (self.scheduler, self.preemptor):
                machine.handle(ObjectStored(obj), now=self.now)

    def schedule(self) -> list[CycleRan]:
        """A pass; placements waiting for their claims are allocated as proposed, then bound."""
        ran = [o for o in self.scheduler.run_pass(self.now) if isinstance(o, CycleRan)]
        for proposed in ran:
            if proposed.decision.placed and proposed.bind is None:
                self._allocate(proposed)
        bindings = [o for o in self.scheduler.run_pass(self.now) if isinstance(o, Binding)]
        for binding in [r.bind for r in ran if r.bind is not None] + bindings:
            placements = tuple((p.pod_uid, p.node_name, p.devices) for p in binding.placements)
            self.preemptor.handle(PodsBound(placements), now=self.now)
        return ran

    def _allocate(self, ran: CycleRan) -> None:
        proposal = ran.proposal_status or {}
        held: list[tuple[str | None, dict[str, Any]]] = [
            (str(placed["uid"]), record)
            for placed in proposal["pods"].values()
            for record in placed.get("claims") or []
        ]
        held += [(None, record) for record in proposal.get("claims") or []]
        self.preemptor.handle(ClaimsHeld(ran.group.uid, tuple(held)), now=self.now)
        self.scheduler.handle(ClaimsAllocated(ran.group.uid, "allocated"), now=self.now)

    def preempt(self, uid: str) -> Preempted:
        self.preemptor.request(uid, cause="request")
        (answer,) = [o for o in self.preemptor.run_pass(self.now) if isinstance(o, Preempted)]
        return answer

    def evict(self, answer: Preempted) -> None:
        uids = tuple(p.uid for v in answer.decision.victims for p in v.pods)
        self.scheduler.handle(PodsEvicted(uids), now=self.now)
        self.scheduler.handle(
            Nominated(answer.preemptor.uid, answer.decision.nodes, answer.expires_at), now=self.now
        )
        for machine in (self.scheduler, self.preemptor):
            machine.handle(PodsFinished(uids, PodPhase.FAILED), now=self.now)
        self.now += 1


def state_of(machine: PreemptorStateMachine) -> tuple[object, ...]:
    """Everything the search may change: each node's free room and free devices, the placements, the
    claim usage and who holds what."""
    snapshot, claims = machine.cluster.snapshot, machine.cluster.claims
    owners = [*machine.cluster.book.pods, *machine.cluster.book.groups]
    return (
        {
            state.name: (state.free(), {c: list(n) for c, n in state.free_devices.items()})
            for state in snapshot.node_states()
        },
        sorted(snapshot.placements()),
        dict(claims.usage.holders),
        {device: dict(consumed) for device, consumed in claims.usage.consumed.items()},
        dict(claims.usage.shares),
        {owner: claims.held_by(owner) for owner in owners if claims.holds(owner)},
    )


def victims_of(answer: Preempted) -> set[str]:
    return {victim.owner.name for victim in answer.decision.victims}


def run_model_holders(pair: Pair, *, h200_priority: int) -> None:
    """`h200` holds 7 H200s by its claim; `a100`, lower still, 7 A100s."""
    pair.admit(template("seven-h200", count=7, model="H200"), template("seven-a100", count=7, model="A100"))
    pair.admit(
        podgroup("h200", min_count=1, priority=h200_priority), claiming("h200-0", "seven-h200", group="h200")
    )
    pair.admit(podgroup("a100", min_count=1, priority=5), claiming("a100-0", "seven-a100", group="a100"))
    assert all(ran.decision.placed for ran in pair.schedule())


def test_the_holder_of_the_devices_the_preemptors_selector_asks_for_is_evicted_and_they_are_reused():
    pair = Pair()
    run_model_holders(pair, h200_priority=10)
    high = podgroup("high", min_count=1, priority=1000)
    pair.admit(
        template("four-h200", count=4, model="H200"), high, claiming("high-0", "four-h200", group="high")
    )
    (ran,) = pair.schedule()
    assert ran.preemption_priority == 1000

    answer = pair.preempt(high.uid)

    # The A100 holder is less important and taken out first, but its devices do not serve the selector.
    assert victims_of(answer) == {"h200"}
    assert answer.decision.nodes == (H200,)
    (placement,) = answer.decision.placements
    assert len(placement.devices[CLASS]) == 4
    pair.evict(answer)
    (retry,) = pair.schedule()
    assert retry.decision.placed
    assert {p.node_name for p in retry.decision.placements} == {H200}
    assert pair.preemptor.nominations == {}


def test_a_lower_priority_holder_of_devices_the_selector_refuses_is_never_evicted():
    pair = Pair()
    run_model_holders(pair, h200_priority=2000)
    high = podgroup("high", min_count=1, priority=1000)
    pair.admit(
        template("four-h200", count=4, model="H200"), high, claiming("high-0", "four-h200", group="high")
    )
    pair.schedule()
    before = state_of(pair.preemptor)

    answer = pair.preempt(high.uid)

    assert answer.decision.victims == ()
    assert answer.decision.reason == PreemptionReason.WOULD_NOT_FIT.format(where="placement in the cluster")
    assert state_of(pair.preemptor) == before


def shares(pair: Pair) -> tuple[ApiObject, ApiObject]:
    """Two standalone pods sharing the H200 node's shareable GPU, 400m of its core each."""
    on_h200 = {HOST: H200}
    pair.admit(template("share-400", cores="400m"), template("share-600", cores="600m"))
    low = claiming("low-share", "share-400", priority=10, node_selector=on_h200)
    mid = claiming("mid-share", "share-400", priority=20, node_selector=on_h200)
    pair.admit(low, mid)
    assert all(ran.decision.placed for ran in pair.schedule())
    assert pair.preemptor.cluster.claims.usage.consumed[SHARED][f"{CLASS}/cores"] == 800
    return low, mid


def test_a_share_is_freed_by_evicting_the_cheapest_share_holder_and_taken_by_the_preemptor():
    pair = Pair()
    low, _ = shares(pair)
    high = claiming("high-share", "share-600", priority=1000, node_selector={HOST: H200})
    pair.admit(high)
    (ran,) = pair.schedule()
    assert not ran.decision.placed
    assert ran.preemption_priority == 1000
    before = state_of(pair.preemptor)

    answer = pair.preempt(ran.group.uid)

    assert [p.uid for v in answer.decision.victims for p in v.pods] == [low.uid]  # 400m + 600m fit 1 core
    assert answer.decision.nodes == (H200,)
    assert state_of(pair.preemptor) == before
    pair.evict(answer)
    (retry,) = pair.schedule()
    assert retry.decision.placed
    assert pair.preemptor.cluster.claims.usage.consumed[SHARED][f"{CLASS}/cores"] == 1000
    (ended,) = pair.preemptor.run_pass(pair.now)
    assert ended.reason == NominationEndReason.SCHEDULED


def test_a_share_larger_than_the_device_evicts_nobody():
    pair = Pair()
    shares(pair)
    pair.admit(template("share-1200", cores="1200m"))
    high = claiming("high-share", "share-1200", priority=1000, node_selector={HOST: H200})
    pair.admit(high)
    (ran,) = pair.schedule()

    answer = pair.preempt(ran.group.uid)

    assert answer.decision.victims == ()


def test_the_share_of_a_pod_on_its_way_out_counts_as_free_and_is_held_again_after_the_search():
    pair = Pair()
    low, _ = shares(pair)
    pair.preemptor.handle(PodsEvicted((low.uid,)), now=pair.now)  # deleted: leaving, not ended
    high = claiming("high-share", "share-600", priority=1000, node_selector={HOST: H200})
    pair.admit(high)
    (ran,) = pair.schedule()
    before = state_of(pair.preemptor)

    answer = pair.preempt(ran.group.uid)

    assert answer.decision.victims == ()
    assert answer.decision.reason == PreemptionReason.FITS
    assert state_of(pair.preemptor) == before


def first_nominated(pair: Pair) -> tuple[ApiObject, ApiObject]:
    """`first` (600m) nominated on the shareable GPU of `low`, which is evicted; `mid` keeps its 400m."""
    low, mid = shares(pair)
    first = claiming("first", "share-600", priority=1000, node_selector={HOST: H200})
    pair.admit(first)
    (ran,) = pair.schedule()
    answer = pair.preempt(ran.group.uid)
    assert [p.uid for v in answer.decision.victims for p in v.pods] == [low.uid]
    return first, mid


def test_the_share_found_for_a_nominated_preemptor_is_held_from_the_searches_after():
    pair = Pair()
    first_nominated(pair)
    second = claiming("second", "share-600", priority=1000, node_selector={HOST: H200})
    pair.admit(second)
    (ran,) = pair.schedule()

    answer = pair.preempt(ran.group.uid)

    # low's 400m is on its way out, but it is first's: mid's 400m + 600m + 600m would exceed the core.
    assert answer.decision.victims == ()
    assert answer.decision.reason != PreemptionReason.FITS
    assert not any(owner.startswith("nominated") for owner in state_of(pair.preemptor)[-1])


def test_a_nomination_whose_share_a_pod_bound_since_has_taken_is_cleared_as_infeasible():
    pair = Pair()
    first, _ = first_nominated(pair)
    rival = claiming("rival", "share-600", priority=2000, node_selector={HOST: H200})
    pair.admit(rival)
    device = {"request": "gpus", "driver": CLASS, "pool": H200, "device": "gpu-7"}
    record = {
        "resourceClaimName": "rival-gpus",
        "devices": [{**device, "consumedCapacity": {f"{CLASS}/cores": "600m"}}],
    }
    for event in (ClaimsHeld(rival.uid, ((rival.uid, record),)), PodsBound(((rival.uid, H200, {}),))):
        pair.preemptor.handle(event, now=pair.now)

    (ended,) = pair.preemptor.run_pass(pair.now)

    assert (ended.group.uid, ended.reason, ended.announce) == (
        first.uid,
        NominationEndReason.INFEASIBLE,
        True,
    )


@pytest.mark.parametrize("mode", ["Pod", "PodGroup"])
def test_a_podgroup_claim_is_freed_with_its_whole_group_and_allocated_to_the_preemptors_own(mode):
    # `Pod` mode: the group's claim goes out with its last pod; `PodGroup` mode: with the group, one unit.
    pair = Pair(racks=2)
    for name, priority in (("cheap", 10), ("dear", 20)):
        group = podgroup(name, min_count=2, priority=priority, claims=FABRIC)
        group = dataclasses.replace(group, spec={**group.spec, "disruptionMode": mode})
        pair.admit(group, *gang(name, 2, gpus=1, cpu="1", claims=FABRIC))
    assert all(ran.decision.placed for ran in pair.schedule())
    cheap_rack = {
        placement.node_name.rsplit("-n", 1)[0]
        for placement in pair.preemptor.cluster.snapshot.placements()
        if placement.pod_name.startswith("cheap")
    }
    high = podgroup("high", min_count=1, priority=1000, claims=FABRIC)
    pair.admit(high, *gang("high", 1, gpus=1, cpu="1", claims=FABRIC))
    (ran,) = pair.schedule()
    assert not ran.decision.placed  # every rack's fabric is taken, GPUs are not
    before = state_of(pair.preemptor)

    answer = pair.preempt(high.uid)

    assert victims_of(answer) == {"cheap"}
    assert {node.rsplit("-n", 1)[0] for node in answer.decision.nodes} == cheap_rack
    assert state_of(pair.preemptor) == before
    pair.evict(answer)
    (retry,) = pair.schedule()
    assert retry.decision.placed
    assert {p.node_name.rsplit("-n", 1)[0] for p in retry.decision.placements} == cheap_rack


@st.composite
def claim_holders(draw: Any) -> Pair:
    """Standalone pods of random priorities holding shares of either node's shareable GPU, or whole GPUs
    of the node's model."""
    pair = Pair()
    pair.admit(*(template(f"share-{cores}", cores=cores) for cores in (*SHARE_CORES, "600m", "900m")))
    for count in range(1, 8):
        pair.admit(template(f"h200-{count}", count=count, model="H200"))
        pair.admit(template(f"a100-{count}", count=count, model="A100"))
    for position in range(draw(st.integers(2, 10))):
        priority = draw(st.sampled_from([1, 10, 100, 2000]))
        if draw(st.booleans()):
            node = draw(st.sampled_from([H200, A100]))
            cores = draw(st.sampled_from(SHARE_CORES))
            holder = claiming(f"p{position}", f"share-{cores}", priority=priority, node_selector={HOST: node})
        else:
            model = draw(st.sampled_from(["h200", "a100"]))
            holder = claiming(f"p{position}", f"{model}-{draw(st.integers(1, 6))}", priority=priority)
        pair.admit(holder)
    pair.schedule()
    return pair


def asked(pair: Pair, obj: ApiObject) -> Preemptor:
    cluster = pair.preemptor.cluster
    group = cluster.book.groups[cluster.book.group_uids[obj.uid]]
    return Preemptor(
        cluster.cycle_group(group), [cluster.book.pods[uid].request for uid in sorted(group.pending)]
    )


def fits_without(pair: Pair, request: Preemptor, uids: set[str]) -> bool:
    """The scheduling cycle's answer with these pods gone, their claims' shares with them."""
    snapshot, claims = pair.preemptor.cluster.snapshot, pair.preemptor.cluster.claims
    released = snapshot.release_many(sorted(uids))
    held = {uid: claims.held_by(uid) for uid in uids if claims.holds(uid)}
    for uid in held:
        claims.release(uid)
    try:
        return schedule_podgroup(snapshot, request.group, request.pods, now=pair.now).placed
    finally:
        snapshot.restore_many(released)
        for uid, allocations in held.items():
            claims.hold(uid, allocations)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pair=claim_holders(), share=st.booleans(), size=st.integers(1, 7), cores=st.sampled_from(["600m", "900m"])
)
def test_claim_victims_make_room_none_could_be_spared_and_the_state_is_left_as_it_was(
    pair, share, size, cores
):
    if share:
        high = claiming("high", f"share-{cores}", priority=1000, node_selector={HOST: H200})
    else:
        high = claiming("high", f"h200-{size}", priority=1000)
    pair.admit(high)
    (ran,) = [r for r in pair.schedule() if r.group.uid == high.uid]
    if ran.decision.placed:
        return
    request = asked(pair, high)
    before = state_of(pair.preemptor)

    decision = find_victims(pair.preemptor.cluster.snapshot, pair.preemptor.candidates, request, now=pair.now)

    assert state_of(pair.preemptor) == before
    lower = {uid for uid, pod in pair.preemptor.candidates.pods.items() if pod.priority < 1000}
    evicted = {pod.uid for victim in decision.victims for pod in victim.pods}
    if not evicted:
        assert not fits_without(pair, request, lower)
        return
    assert evicted <= lower
    assert fits_without(pair, request, evicted)
    for uid in evicted:
        assert not fits_without(pair, request, evicted - {uid}), f"{uid} could be spared"
