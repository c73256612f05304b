"""The preemptor's state machine next to the scheduler's: it sees what the scheduler bound, answers
requests on the current state, holds nominations until they are taken or expire."""

from __future__ import annotations

import pytest

from libs.cluster.generator import ClusterShape
from libs.core.preemption import (
    NominationEnded,
    NominationEndReason,
    Preempted,
    PreemptorSettings,
    PreemptorStateMachine,
)
from libs.core.preemption.model import PreemptionReason
from libs.core.scheduling import RACK_KEY, MachineSettings, PodPhase, SchedulerStateMachine
from libs.core.scheduling.inputs import (
    Nominated,
    ObjectStored,
    PodsBound,
    PodsEvicted,
    PodsFinished,
    World,
)
from libs.core.scheduling.outputs import Binding, CycleRan
from tests.unit.scheduling.manifests import cluster, composite, gang, pod, podgroup, workload

SHAPE = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2)  # 2 racks of 2 nodes of 8 GPUs
NOW = 1_000.0


class Pair:
    """A scheduler and a preemptor told the same things; the preemptor also hears the bindings."""

    def __init__(self, shape: ClusterShape = SHAPE, *, fair_sharing: bool = False) -> None:
        world = World(cluster(shape) + [workload()], {})
        self.scheduler = SchedulerStateMachine(MachineSettings(fair_sharing=fair_sharing))
        self.scheduler.load(world, now=NOW)
        self.preemptor = PreemptorStateMachine(PreemptorSettings(fair_sharing=fair_sharing))
        self.preemptor.load(world, now=NOW)
        self.now = NOW

    def admit(self, *objects) -> None:
        for obj in objects:
            for machine in (self.scheduler, self.preemptor):
                machine.handle(ObjectStored(obj), now=self.now)

    def schedule(self) -> list[CycleRan]:
        outputs = self.scheduler.run_pass(self.now)
        for output in outputs:
            binding = output.bind if isinstance(output, CycleRan) else output
            if isinstance(binding, Binding):
                placements = tuple((p.pod_uid, p.node_name, p.devices) for p in binding.placements)
                self.preemptor.handle(PodsBound(placements), now=self.now)
        return [output for output in outputs if isinstance(output, CycleRan)]

    def preempt(self, group) -> Preempted:
        self.preemptor.request(group.uid, cause="request")
        (answer,) = [o for o in self.preemptor.run_pass(self.now) if isinstance(o, Preempted)]
        return answer

    def evict(self, answer: Preempted) -> None:
        """What the services do next: the scheduler hears of the evictions and the nomination, the node
        agent stops the pods."""
        uids = tuple(p.uid for v in answer.decision.victims for p in v.pods)
        self.scheduler.handle(PodsEvicted(uids), now=self.now)
        self.scheduler.handle(
            Nominated(answer.preemptor.uid, answer.decision.nodes, answer.expires_at), now=self.now
        )
        for machine in (self.scheduler, self.preemptor):
            machine.handle(PodsFinished(uids, PodPhase.FAILED), now=self.now)


def test_a_rack_gang_preempts_the_cheaper_rack_and_binds_there_after_the_evictions():
    pair = Pair()
    cheap, dear = podgroup("cheap", min_count=2, priority=10), podgroup("dear", min_count=2, priority=50)
    pair.admit(cheap, *gang("cheap", 2, gpus=8), dear, *gang("dear", 2, gpus=8))
    pair.schedule()
    high = podgroup("high", min_count=2, priority=1000, topology_key=RACK_KEY)
    pair.admit(high, *gang("high", 2, gpus=8))
    (ran,) = pair.schedule()
    assert ran.preemption_priority == 1000

    answer = pair.preempt(high)

    victims = {v.owner.name for v in answer.decision.victims}
    assert victims == {"cheap"}
    assert answer.expires_at == NOW + 60
    assert pair.preemptor.nominations == {high.uid: answer.decision.nodes}
    pair.evict(answer)
    pair.now += 1
    (retry,) = pair.schedule()
    assert retry.decision.placed
    assert {p.node_name for p in retry.decision.placements} == set(answer.decision.nodes)
    # The preemptor saw the binding: the nomination is over, its row to be removed quietly.
    (ended,) = pair.preemptor.run_pass(pair.now)
    assert isinstance(ended, NominationEnded)
    assert (ended.reason, ended.announce) == (NominationEndReason.SCHEDULED, False)


def test_victims_already_chosen_are_never_chosen_again_and_nominated_room_is_held():
    pair = Pair()
    for name, priority in (("a", 10), ("b", 20)):
        group = podgroup(name, min_count=2, priority=priority)
        pair.admit(group, *gang(name, 2, gpus=8))
    pair.schedule()
    first = podgroup("first", min_count=2, priority=1000, topology_key=RACK_KEY)
    second = podgroup("second", min_count=2, priority=1000, topology_key=RACK_KEY)
    pair.admit(first, *gang("first", 2, gpus=8), second, *gang("second", 2, gpus=8))
    pair.schedule()

    one = pair.preempt(first)
    two = pair.preempt(second)

    assert {v.owner.name for v in one.decision.victims} == {"a"}
    assert {v.owner.name for v in two.decision.victims} == {"b"}
    assert set(one.decision.nodes).isdisjoint(two.decision.nodes)


def test_a_nomination_not_taken_in_time_is_cleared_with_an_event():
    pair = Pair()
    low = podgroup("low", min_count=4, priority=1)
    pair.admit(low, *gang("low", 4, gpus=8))
    pair.schedule()
    high = podgroup("high", min_count=1, priority=1000)
    pair.admit(high, *gang("high", 1, gpus=8))
    pair.schedule()
    answer = pair.preempt(high)
    assert answer.decision.victims

    pair.now += 59.9
    assert pair.preemptor.run_pass(pair.now) == []
    pair.now += 0.1
    (ended,) = pair.preemptor.run_pass(pair.now)

    assert (ended.reason, ended.announce) == (NominationEndReason.EXPIRED, True)
    assert pair.preemptor.nominations == {}


def test_a_request_is_answered_on_the_current_state_not_on_what_it_said():
    pair = Pair()
    low = podgroup("low", min_count=4, priority=1)
    pair.admit(low, *gang("low", 4, gpus=8))
    pair.schedule()
    high = podgroup("high", min_count=1, priority=1000)
    pair.admit(high, *gang("high", 1, gpus=8))
    pair.schedule()
    # Before the request is answered, a node's pod finishes.
    one = next(uid for uid, pod in pair.preemptor.cluster.book.pods.items() if pod.obj.name == "low-0")
    pair.preemptor.handle(PodsFinished((one,), PodPhase.SUCCEEDED), now=pair.now)

    answer = pair.preempt(high)

    assert answer.decision.victims == ()
    assert answer.expires_at is None


def test_a_nominated_gang_whose_victims_end_one_by_one_is_retried_once_the_last_has_ended():
    pair = Pair()
    for name in ("a", "b", "c", "d"):
        pair.admit(podgroup(name, min_count=1, priority=10), *gang(name, 1, gpus=8))
    pair.schedule()
    high = podgroup("high", min_count=4, priority=1000)
    pair.admit(high, *gang("high", 4, gpus=8))
    pair.schedule()
    answer = pair.preempt(high)
    victims = [pod.uid for victim in answer.decision.victims for pod in victim.pods]
    assert len(victims) == 4
    pair.scheduler.handle(PodsEvicted(tuple(victims)), now=pair.now)
    pair.scheduler.handle(Nominated(high.uid, answer.decision.nodes, answer.expires_at), now=pair.now)

    placed = False
    for uid in victims:
        pair.now += 1
        pair.scheduler.handle(PodsFinished((uid,), PodPhase.FAILED), now=pair.now)
        placed = any(ran.decision.placed for ran in pair.schedule() if ran.group.name == "high")
    # Parked after a retry that came too early, it is woken by the last victim's room (not by the
    # five-minute retry of parked groups).
    for _ in range(10):
        if placed:
            break
        pair.now += 5
        placed = any(ran.decision.placed for ran in pair.schedule() if ran.group.name == "high")

    assert placed
    assert pair.now - NOW <= 30


def test_a_pod_without_a_podgroup_preempts_and_is_preempted_as_a_unit_of_its_own():
    pair = Pair()
    lows = [pod(f"low-{i}", gpus=8, priority=5) for i in range(4)]
    pair.admit(*lows)
    pair.schedule()
    high = pod("high", gpus=8, priority=1000)
    pair.admit(high)
    (ran,) = pair.schedule()
    assert ran.preemption_priority == 1000

    answer = pair.preempt(high)

    ((victim),) = answer.decision.victims
    assert victim.owner.standalone
    assert len(victim.pods) == 1
    assert answer.preemptor.standalone
    assert pair.preemptor.nominations == {high.uid: answer.decision.nodes}
    # Evicted, the victim's room goes to the standalone pod, on the nominated node.
    pair.evict(answer)
    pair.now += 1
    (retry,) = pair.schedule()
    assert retry.group.standalone
    assert [p.node_name for p in retry.decision.placements] == list(answer.decision.nodes)
    (ended,) = pair.preemptor.run_pass(pair.now)
    assert (ended.reason, ended.announce) == (NominationEndReason.SCHEDULED, False)


def nominated_after_evictions(pair: Pair):
    """`high` (one 8-GPU pod) nominated on the node of a low-priority pod that has since ended."""
    lows = [pod(f"low-{i}", gpus=8, priority=5) for i in range(4)]
    pair.admit(*lows)
    pair.schedule()
    high = podgroup("high", min_count=1, priority=1000)
    pair.admit(high, *gang("high", 1, gpus=8))
    pair.schedule()
    answer = pair.preempt(high)
    uids = tuple(p.uid for v in answer.decision.victims for p in v.pods)
    for machine in (pair.scheduler, pair.preemptor):
        machine.handle(PodsFinished(uids, PodPhase.FAILED), now=pair.now)
    assert pair.preemptor.run_pass(pair.now) == []
    return high, answer.decision.nodes


def test_a_nomination_whose_room_another_pod_was_bound_in_is_cleared_with_an_event():
    pair = Pair()
    high, (node,) = nominated_after_evictions(pair)
    rival = pod("rival", gpus=4, priority=2000)
    pair.admit(rival)

    pair.preemptor.handle(PodsBound(((rival.uid, node, {}),)), now=pair.now)
    (ended,) = pair.preemptor.run_pass(pair.now)

    assert isinstance(ended, NominationEnded)
    assert (ended.group.uid, ended.reason, ended.announce) == (high.uid, NominationEndReason.INFEASIBLE, True)
    assert ended.message == f"the room held on {node} no longer holds the group"
    assert pair.preemptor.nominations == {}


def test_a_nomination_is_kept_while_its_room_still_holds_the_group():
    pair = Pair()
    high, (node,) = nominated_after_evictions(pair)
    small = pod("small", gpus=0, cpu="1", priority=2000)
    pair.admit(small)

    pair.preemptor.handle(PodsBound(((small.uid, node, {}),)), now=pair.now)

    assert pair.preemptor.run_pass(pair.now) == []
    assert pair.preemptor.nominations == {high.uid: (node,)}


def test_a_new_term_asks_again_for_the_unschedulable_groups_a_lower_priority_could_make_room_for():
    objects = cluster(SHAPE) + [workload()]
    low = podgroup("low", min_count=4, priority=1)
    lows = gang("low", 4, gpus=8)
    high = podgroup("high", min_count=1, priority=1000)
    peer = podgroup("peer", min_count=1, priority=1)
    pending = [*gang("high", 1, gpus=8), *gang("peer", 1, gpus=8)]
    nodes = sorted(o.name for o in objects if o.kind == "Node")
    bindings = {pod.uid: node for pod, node in zip(lows, nodes, strict=True)}
    world = World([*objects, low, high, peer, *lows, *pending], bindings)
    preemptor = PreemptorStateMachine()

    preemptor.load(world, now=NOW, unschedulable=[high.uid, peer.uid])
    answers = [o for o in preemptor.run_pass(NOW) if isinstance(o, Preempted)]

    assert [a.preemptor.name for a in answers] == ["high"]
    assert answers[0].cause is None
    assert {v.owner.name for v in answers[0].decision.victims} == {"low"}


def test_a_gang_whose_first_request_found_nothing_asks_again_once_a_unit_it_may_preempt_appears():
    """One low and three equal-priority pods hold the four nodes the high gang needs: the first request
    rightly finds nothing. The equal-priority pods end and a new low-priority gang takes their nodes: the
    high gang asks again, and evicting the two low-priority units fits it."""
    pair = Pair()
    low = podgroup("low", min_count=1, priority=10)
    equal = podgroup("equal", min_count=3, priority=1000)
    pair.admit(low, *gang("low", 1, gpus=8), equal, *gang("equal", 3, gpus=8))
    pair.schedule()
    high = podgroup("high", min_count=4, priority=1000)
    pair.admit(high, *gang("high", 4, gpus=8))
    (first,) = pair.schedule()
    assert first.preemption_priority == 1000
    assert pair.preempt(high).decision.victims == ()

    equal_uids = tuple(p.uid for p in pair.scheduler.book.pods.values() if p.group_key == "ml/equal")
    for machine in (pair.scheduler, pair.preemptor):
        machine.handle(PodsFinished(equal_uids, PodPhase.SUCCEEDED), now=pair.now)
    later = podgroup("later", min_count=3, priority=10)
    pair.admit(later, *gang("later", 3, gpus=8))
    placed_now = {o.group.name for o in pair.schedule() if o.decision.placed}
    assert placed_now == {"later"}  # the high gang backs off; the low gang takes the freed nodes

    asked = []
    for _ in range(4):  # well before the five-minute flush: the binding of the low gang woke it
        pair.now += 30
        asked += [o for o in pair.schedule() if o.preemption_priority is not None]
        if asked:
            break
    assert asked, "the high gang never asked again"
    answer = pair.preempt(high)
    assert {v.owner.name for v in answer.decision.victims} == {"low", "later"}
    pair.evict(answer)
    pair.now += 1
    (placed,) = pair.schedule()
    assert placed.decision.placed


def test_a_gang_whose_podgroup_says_never_waits_rather_than_preempting():
    """v1beta1's PodGroup `preemptionPolicy: Never`: the gang may wait for room but takes none."""
    pair = Pair()
    cheap, dear = podgroup("cheap", min_count=2, priority=10), podgroup("dear", min_count=2, priority=50)
    pair.admit(cheap, *gang("cheap", 2, gpus=8), dear, *gang("dear", 2, gpus=8))
    pair.schedule()
    patient = podgroup("patient", min_count=2, priority=1000, topology_key=RACK_KEY)
    patient.spec["preemptionPolicy"] = "Never"
    pair.admit(patient, *gang("patient", 2, gpus=8))
    pair.schedule()

    answer = pair.preempt(patient)

    assert answer.decision.victims == ()
    assert answer.decision.reason == PreemptionReason.NEVER


@pytest.mark.parametrize(("disruption", "evicted"), [(None, 2), ("all", 2), ("single", 1)])
def test_a_composite_is_preempted_as_one_unit_unless_its_children_may_go_alone(disruption, evicted):
    pair = Pair()
    job = composite("job", priority=10, disruption=disruption)
    children = [podgroup(name, min_count=1, priority=10, parent="job") for name in ("job-a", "job-b")]
    other = podgroup("other", min_count=2, priority=50)
    pair.admit(job, *children, *gang("job-a", 1, gpus=8), *gang("job-b", 1, gpus=8))
    pair.admit(other, *gang("other", 2, gpus=8))
    pair.schedule()
    high = podgroup("high", min_count=1, priority=1000)
    pair.admit(high, *gang("high", 1, gpus=8))
    (ran,) = pair.schedule()
    assert ran.preemption_priority == 1000

    answer = pair.preempt(high)

    pods = {p.placement.pod_name for v in answer.decision.victims for p in v.pods}
    assert len(pods) == evicted
    assert pods <= {"job-a-0", "job-b-0"}
    (owner,) = {v.owner.name for v in answer.decision.victims}
    assert owner == "job" if evicted == 2 else owner in ("job-a", "job-b")
