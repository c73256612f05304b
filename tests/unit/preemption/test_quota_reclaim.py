"""Reclaim through the preemptor: a gang whose ClusterQueue is under its nominal quota takes back what
another queue of its cohort borrowed, by evicting the gangs Kueue's policies choose, whole."""

from __future__ import annotations

from libs.cluster.generator import ClusterShape
from libs.core.preemption import Preempted, PreemptorStateMachine
from libs.core.scheduling.inputs import NominationRecord, World
from tests.unit.preemption.test_world import NOW, SHAPE, Pair
from tests.unit.scheduling.manifests import (
    cluster,
    cluster_queue,
    flavor,
    local_queue,
    quota_objects,
    team_gang,
    workload,
)


def two_teams() -> Pair:
    pair = Pair()
    pair.admit(
        *quota_objects(
            flavor(),
            cluster_queue("team-a", 16, cohort="research"),
            cluster_queue("team-b", 16, cohort="research", reclaim="Any"),
            local_queue("a", "team-a"),
            local_queue("b", "team-b"),
        )
    )
    return pair


def test_the_gangs_a_queue_borrowed_are_evicted_whole_for_the_queue_that_reclaims():
    pair = two_teams()
    own, borrowed = team_gang("a-own", "a", 2, priority=10), team_gang("a-borrowed", "a", 2, priority=10)
    pair.admit(*own, *borrowed)
    pair.schedule()
    reclaiming = team_gang("b-train", "b", 1, priority=1)
    pair.admit(*reclaiming)
    (waits,) = pair.schedule()
    assert waits.preemption_priority == 1

    answer = pair.preempt(reclaiming[0])

    assert isinstance(answer, Preempted)
    (victim,) = answer.decision.victims
    assert victim.owner.name == "a-borrowed"
    assert victim.whole
    assert sorted(pod.uid for pod in victim.pods) == sorted(pod.uid for pod in borrowed[1:])
    assert victim.message == (
        f"Preempted to accommodate a workload (UID: {reclaiming[0].uid}) due to reclamation within the cohort"
    )
    assert answer.decision.reason == "preempting 1 gang(s) to free quota for the group in ClusterQueue team-b"


def test_the_reclaiming_gang_is_bound_once_the_evicted_gangs_end():
    pair = two_teams()
    pair.admit(*team_gang("a-own", "a", 2), *team_gang("a-borrowed", "a", 2))
    pair.schedule()
    reclaiming = team_gang("b-train", "b", 1)
    pair.admit(*reclaiming)
    pair.schedule()

    pair.evict(pair.preempt(reclaiming[0]))
    (ran,) = pair.schedule()

    assert ran.group.name == "b-train"
    assert ran.bind is not None
    assert ran.bind.cluster_queue == "team-b"


def run_until_quiet(pair: Pair, rounds: int = 6) -> set[str]:
    """The services' loop: schedule; each gang that asks is answered and its victims evicted; again. The
    names of the gangs bound."""
    bound: set[str] = set()
    for _ in range(rounds):
        for ran in pair.schedule():
            if ran.bind is not None:
                bound.add(ran.group.name)
            if ran.preemption_priority is not None:
                answer = pair.preempt(next(g for g in pair.groups if g.uid == ran.group.uid))
                if answer.decision.victims:
                    pair.evict(answer)
        pair.now += 1
    return bound


def test_a_second_gang_reclaiming_while_the_first_is_not_bound_yet_is_not_told_it_fits():
    """The first reclaim's gang holds no node until it is bound; the second must not be told that the room
    the first freed is its own, nor wait for ever once the first took it."""
    pair = two_teams()
    pair.admit(*team_gang("a-own", "a", 2), *team_gang("a-lent-1", "a", 1), *team_gang("a-lent-2", "a", 1))
    pair.schedule()
    first, second = team_gang("b-first", "b", 1), team_gang("b-second", "b", 1)
    pair.admit(*first, *second)
    asked = {ran.group.name for ran in pair.schedule() if ran.preemption_priority is not None}
    assert asked == {"b-first", "b-second"}
    pair.evict(pair.preempt(first[0]))

    answer = pair.preempt(second[0])

    assert answer.decision.reason != "the group fits without preempting anyone"
    assert [victim.owner.name for victim in answer.decision.victims] in (["a-lent-1"], ["a-lent-2"])


def test_a_gang_waiting_for_quota_asks_again_once_the_gang_before_it_took_the_room_it_was_told_of():
    pair = two_teams()
    pair.admit(*team_gang("a-own", "a", 2), *team_gang("a-lent-1", "a", 1), *team_gang("a-lent-2", "a", 1))
    pair.schedule()
    first, second = team_gang("b-first", "b", 1), team_gang("b-second", "b", 1)
    pair.groups = [first[0], second[0]]
    pair.admit(*first, *second)

    bound = run_until_quiet(pair)

    assert {"b-first", "b-second"} <= bound


def test_no_gang_is_evicted_for_a_gang_another_teams_head_would_still_go_before():
    pair = Pair(ClusterShape(blocks=1, racks_per_block=4, nodes_per_rack=5), fair_sharing=True)
    pair.admit(
        *quota_objects(
            flavor(),
            cluster_queue("team-a", 32, cohort="research", reclaim="Any"),
            cluster_queue("team-b", 32, cohort="research"),
            cluster_queue("team-c", 32, cohort="research"),
            cluster_queue("idle", 64, cohort="research"),
            local_queue("a", "team-a"),
            local_queue("b", "team-b"),
            local_queue("c", "team-c"),
        )
    )
    pair.admit(*team_gang("a-job", "a", 4), *team_gang("c-job", "c", 4))
    pair.admit(*team_gang("b1", "b", 6), *team_gang("b2", "b", 4))  # team-b borrows 48 of 160
    while any(ran.decision.placed for ran in pair.schedule()):
        pass
    pair.admit(*team_gang("c-head", "c", 3))  # would borrow 24: waits, team-c may not reclaim
    reclaiming = team_gang("a-next", "a", 4)  # would borrow 32, more than c-head's queue would
    pair.admit(*reclaiming)
    ran = {r.group.name: r for r in pair.schedule()}
    assert ran["a-next"].preemption_priority == 0

    answer = pair.preempt(reclaiming[0])

    assert answer.decision.victims == ()
    assert answer.decision.reason == (
        "no gang that ClusterQueue team-a's preemption policies allow to preempt frees its quota"
    )


def test_a_new_preemptor_term_holds_the_quota_of_a_reclaim_nominated_in_the_term_before():
    """The quota a reclaim freed for its nominated gang is held in memory: a new term rebuilds the hold from the
    stored nomination, so its first answer to a second reclaiming gang is not that the group fits."""
    quota = quota_objects(
        flavor(),
        cluster_queue("team-a", 16, cohort="research"),
        cluster_queue("team-b", 16, cohort="research", reclaim="Any"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
    )
    gangs = {
        name: team_gang(name, "a", pods) for name, pods in (("a-own", 2), ("a-lent-1", 1), ("a-lent-2", 1))
    }
    first, second = team_gang("b-first", "b", 1), team_gang("b-second", "b", 1)
    pair = Pair()
    pair.admit(*quota, *(obj for gang in gangs.values() for obj in gang))
    pair.schedule()
    pair.admit(*first, *second)
    pair.schedule()
    answer = pair.preempt(first[0])
    (evicted,) = [victim.owner.name for victim in answer.decision.victims]
    pair.evict(answer)

    kept = [obj for name, gang in gangs.items() if name != evicted for obj in gang]
    book = pair.preemptor.cluster.book
    bindings = {
        uid: pod.node
        for uid, pod in book.pods.items()
        if pod.node is not None and uid in {o.uid for o in kept}
    }
    world = World(
        cluster(SHAPE) + [workload()] + list(quota) + kept + list(first) + list(second),
        bindings,
        nominations=(NominationRecord(first[0].uid, answer.decision.nodes, answer.expires_at or NOW + 60),),
    )
    successor = PreemptorStateMachine()
    successor.load(world, now=pair.now)
    successor.request(second[0].uid, cause="request")
    (again,) = [o for o in successor.run_pass(pair.now) if isinstance(o, Preempted)]

    assert again.decision.reason != "the group fits without preempting anyone"
    assert [victim.owner.name for victim in again.decision.victims] == [
        name for name in ("a-lent-1", "a-lent-2") if name != evicted
    ]


def fragmented_by(team_a_gpus: int, *, reclaim: str | None = "Any") -> tuple[Pair, list]:
    """Four nodes of 8 GPUs; team-a runs four one-pod gangs of 6 GPUs, one per node (2 GPUs free on each);
    team-b (16 GPUs, its quota not used) asks for one pod of 8, at team-a's priority."""
    pair = Pair()
    pair.admit(
        *quota_objects(
            flavor(),
            cluster_queue("team-a", team_a_gpus, cohort="research"),
            cluster_queue("team-b", 32 - team_a_gpus, cohort="research", reclaim=reclaim),
            local_queue("a", "team-a"),
            local_queue("b", "team-b"),
        )
    )
    for index in range(4):
        pair.admit(*team_gang(f"a-{index}", "a", 1, gpus=6, priority=5))
    pair.schedule()
    waiting = team_gang("b-train", "b", 1, gpus=8, priority=5)
    pair.admit(*waiting)
    return pair, waiting


def test_a_gang_admitted_within_its_quota_that_no_node_holds_takes_room_back_from_a_borrowing_queue():
    """Placement-aware reclaim: the cohort's quota is not all used (24 of 32), so quota alone frees nothing,
    yet every node is held in part by team-a, which borrows 8: one of its gangs goes, whatever its
    priority, and team-b's gang is bound on its node."""
    pair, waiting = fragmented_by(16)
    (ran,) = pair.schedule()
    assert ran.bind is None
    assert ran.preemption_priority == 5

    answer = pair.preempt(waiting[0])

    (victim,) = answer.decision.victims
    assert victim.owner.namespace == "a"
    assert victim.owner.priority == 5
    assert victim.whole
    assert victim.message == (
        f"Preempted to accommodate a workload (UID: {waiting[0].uid}) due to reclamation within the cohort"
    )
    assert answer.decision.nodes == (victim.pods[0].node,)
    pair.evict(answer)
    (bound,) = pair.schedule()
    assert bound.bind is not None
    assert [p.node_name for p in bound.bind.placements] == [victim.pods[0].node]


def test_no_gang_is_taken_from_a_queue_within_its_own_quota():
    pair, _ = fragmented_by(24)  # team-a uses exactly its 24: nothing is borrowed

    (ran,) = pair.schedule()

    assert ran.bind is None
    assert ran.preemption_priority is None


def test_a_queue_that_may_not_reclaim_does_not_take_room_back():
    pair, waiting = fragmented_by(16, reclaim=None)  # reclaimWithinCohort: Never

    (ran,) = pair.schedule()
    assert ran.preemption_priority is None
    answer = pair.preempt(waiting[0])

    assert answer.decision.victims == ()


def test_placement_aware_reclaim_takes_a_lower_priority_borrower_first():
    pair = two_teams()
    for index, priority in enumerate((9, 9, 3, 9)):
        pair.admit(*team_gang(f"a-{index}", "a", 1, gpus=6, priority=priority))
    pair.schedule()
    waiting = team_gang("b-train", "b", 1, gpus=8, priority=5)
    pair.admit(*waiting)
    pair.schedule()

    answer = pair.preempt(waiting[0])

    (victim,) = answer.decision.victims
    assert victim.owner.name == "a-2"
    assert victim.owner.priority == 3
    assert victim.message == ""  # lower priority: preempted as kube-scheduler would, not reclaimed


def test_a_gang_larger_than_what_its_queue_borrows_is_not_taken_back():
    """team-a uses 24 of a nominal 20: evicting one of its 6-GPU gangs would leave it below its own share."""
    pair, waiting = fragmented_by(20)

    (ran,) = pair.schedule()
    assert ran.preemption_priority is None
    answer = pair.preempt(waiting[0])

    assert answer.decision.victims == ()


def test_placement_aware_reclaim_takes_from_the_queue_with_the_highest_share_first():
    """Five nodes of 8 GPUs, each holding one 6-GPU gang: team-a borrows 8 past its nominal 4, team-c 6 past
    its 12. team-b's 8-GPU pod (within its 24) takes a gang of team-a, the larger share, though the search
    alone would take team-c's (the same priority and age; the last name goes first)."""
    pair = Pair(ClusterShape(blocks=1, racks_per_block=1, nodes_per_rack=5))
    pair.admit(
        *quota_objects(
            flavor(),
            cluster_queue("team-a", 4, cohort="research"),
            cluster_queue("team-b", 24, cohort="research", reclaim="Any"),
            cluster_queue("team-c", 12, cohort="research"),
            local_queue("a", "team-a"),
            local_queue("b", "team-b"),
            local_queue("c", "team-c"),
        )
    )
    for namespace, count in (("a", 2), ("c", 3)):
        for index in range(count):
            pair.admit(*team_gang(f"{namespace}-{index}", namespace, 1, gpus=6))
    pair.schedule()
    waiting = team_gang("b-train", "b", 1, gpus=8)
    pair.admit(*waiting)
    (ran,) = pair.schedule()
    assert ran.preemption_priority == 0

    answer = pair.preempt(waiting[0])

    (victim,) = answer.decision.victims
    assert victim.owner.namespace == "a"
    assert victim.owner.priority == 0


def test_a_borrowing_gang_does_not_evict_by_priority_a_gang_holding_its_own_queues_quota():
    """team-b's gang took a node back from team-a, which borrowed it; team-a's gang coming back (a Job's pods
    are recreated) has the higher priority, yet team-b holds only its nominal quota: it is spared, or the two
    would evict each other for ever."""
    pair, waiting = fragmented_by(16)
    for document in waiting:
        document.spec["priority"] = 1  # below team-a's 5
    pair.schedule()
    answer = pair.preempt(waiting[0])
    assert [victim.owner.namespace for victim in answer.decision.victims] == ["a"]
    pair.evict(answer)
    (bound,) = pair.schedule()
    assert bound.bind is not None

    again = team_gang("a-again", "a", 1, gpus=6, priority=5)
    pair.admit(*again)
    (ran,) = pair.schedule()
    assert ran.bind is None
    answer = pair.preempt(again[0])

    assert answer.decision.victims == ()


def test_a_new_preemptor_term_answers_a_gang_that_waits_for_room_a_borrowing_queue_holds():
    """The request lives in the old term's memory: a new term, told which gangs wait unschedulable, asks
    again for one whose room only placement-aware reclaim frees (no lower priority runs)."""
    pair, waiting = fragmented_by(16)
    pair.schedule()
    book = pair.preemptor.cluster.book
    objects = [group.obj for group in book.groups.values()] + [pod.obj for pod in book.pods.values()]
    bindings = {uid: pod.node for uid, pod in book.pods.items() if pod.node is not None}
    quota = quota_objects(
        flavor(),
        cluster_queue("team-a", 16, cohort="research"),
        cluster_queue("team-b", 16, cohort="research", reclaim="Any"),
        local_queue("a", "team-a"),
        local_queue("b", "team-b"),
    )
    world = World(cluster(SHAPE) + [workload()] + quota + objects, bindings)
    successor = PreemptorStateMachine()
    successor.load(world, now=pair.now, unschedulable=[waiting[0].uid])

    (answer,) = [o for o in successor.run_pass(pair.now) if isinstance(o, Preempted)]

    assert [victim.owner.namespace for victim in answer.decision.victims] == ["a"]
