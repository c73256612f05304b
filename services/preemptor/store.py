"""Between the preemptor's state machine and the database: the world a new leader loads, and a pass's
decisions written in one transaction.

A preemption's story: `preemption.victims_selected` (in the preemptor's story, caused by its
`preemption.requested`), then for each victim `pods.evicted` in the victim's own story saying why it was
chosen, and `podgroup.nominated`; victims' pods and PodGroups are marked `DisruptionTarget=True, reason
PreemptionByScheduler` and the nomination is stored with its expiry.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from libs.core.preemption import (
    NominationEnded,
    Preempted,
    PreemptionOutput,
    RunningPod,
    Victim,
    VictimReason,
)
from libs.core.scheduling import ConditionReason, ConditionType
from libs.core.scheduling.inputs import WORLD_KINDS, NominationRecord, World
from libs.core.scheduling.objects import STANDALONE_PREFIX, ApiObject
from libs.core.scheduling.outputs import GroupRef
from libs.db.core_objects import api_object
from libs.db.node_health import node_health_records
from libs.db.ports import UnitOfWork
from libs.db.records import Condition, Nomination
from libs.events.envelope import AggregateRef, Envelope, EventPayload
from libs.events.scheduling import (
    PodGroupNominated,
    PodGroupNominationCleared,
    PodGroupRef,
    PodRef,
    PodsEvicted,
    PreemptionVictimsSelected,
    TopologyDomainRef,
)

PRODUCER = "preemptor"
FINISHED_PHASES = ("Succeeded", "Failed")


async def unschedulable_groups(uow: UnitOfWork) -> list[str]:
    """Uids of the PodGroups the scheduler last found unschedulable."""
    found = await uow.conditions.with_status(ConditionType.POD_GROUP_SCHEDULED, "False")
    return [c.object_uid for c in found if c.reason == ConditionReason.UNSCHEDULABLE]


async def load_world(uow: UnitOfWork, now: datetime) -> World:
    """The objects the scheduler reads (allocated ResourceClaims included: the shares and reached devices
    their pods and PodGroups hold), where live pods are bound, the pods on their way out (marked for
    deletion or `DisruptionTarget`), and the nominations in force."""
    objects: list[ApiObject] = []
    live: set[str] = set()
    leaving: set[str] = set()
    for kind in WORLD_KINDS:
        for stored in await uow.objects.find(kind):
            objects.append(api_object(stored))
            if kind == "Pod" and stored.status.get("phase") not in FINISHED_PHASES:
                live.add(stored.uid)
                if stored.deletion_requested_at is not None:
                    leaving.add(stored.uid)
    bindings = {b.pod_uid: b.node_name for b in await uow.bindings.get_many(sorted(live))}
    for condition in await uow.conditions.with_status(ConditionType.DISRUPTION_TARGET, "True"):
        if condition.object_uid in live:
            leaving.add(condition.object_uid)
    nominations = tuple(
        NominationRecord(n.podgroup_uid, n.nodes, n.expires_at.timestamp())
        for n in await uow.nominations.active(now)
    )
    health = await node_health_records(uow, (obj for obj in objects if obj.kind == "Node"), now)
    return World(objects, bindings, frozenset(leaving), nominations, health)


async def write_outputs(uow: UnitOfWork, outputs: Iterable[PreemptionOutput], *, now: datetime) -> None:
    """Write a pass's decisions in the caller's unit of work (the caller commits)."""
    conditions: list[Condition] = []
    for output in outputs:
        if isinstance(output, Preempted):
            conditions += await _preempted(uow, output, now)
        elif isinstance(output, NominationEnded):
            await uow.nominations.clear(output.group.uid)
            if output.announce:
                cleared = PodGroupNominationCleared(
                    podgroup=_ref(output.group), reason=f"{output.reason}: {output.message}"
                )
                _emit(uow, cleared, output.group, now, output.cause)
    await uow.conditions.set_many(conditions)


async def _preempted(uow: UnitOfWork, preempted: Preempted, now: datetime) -> list[Condition]:
    decision = preempted.decision
    preemptor = preempted.preemptor
    domain = decision.domain
    selected = PreemptionVictimsSelected(
        preemptor=_ref(preemptor),
        victims=[_pod_ref(pod) for victim in decision.victims for pod in victim.pods],
        victim_groups=[_owner_ref(victim) for victim in decision.victims if not victim.owner.standalone],
        domain=TopologyDomainRef(key=domain.key, value=domain.value) if domain else None,
        nodes=list(decision.nodes) if decision.victims else [],
        reason=decision.reason,
    )
    cause = preempted.cause
    if cause is None:
        # Asked again by a new term, not by the scheduler: nothing to tell when nothing can be done, and
        # victims chosen answer the latest of the group's story (the request an earlier term may have missed).
        if not decision.victims:
            return []
        cause = (await uow.events.latest_of([preemptor.uid])).get(preemptor.uid)
    cause = _emit(uow, selected, preemptor, now, cause)
    if not decision.victims:
        return []
    assert preempted.expires_at is not None
    conditions: list[Condition] = []
    where = str(domain) if domain else "the cluster"
    for victim in decision.victims:
        owner = victim.owner
        message = _victim_message(victim, preempted, where)
        evicted = PodsEvicted(
            pods=[_pod_ref(pod) for pod in victim.pods],
            reason=ConditionReason.PREEMPTION_BY_SCHEDULER,
            podgroup=None if owner.standalone else _owner_ref(victim),
            message=message,
        )
        group = GroupRef(owner.namespace, owner.name, owner.uid, owner.standalone)
        _emit(uow, evicted, group, now, cause)
        # A gang shrunk to its minCount keeps running: its pods are disrupted, the PodGroup is not.
        keeps_running = owner.standalone or victim.shrunk
        marked = [pod.uid for pod in victim.pods] + ([] if keeps_running else [owner.uid])
        conditions += [_disruption_target(uid, message) for uid in marked]
    expires_at = datetime.fromtimestamp(preempted.expires_at, UTC)
    await uow.nominations.put(Nomination(preemptor.uid, decision.nodes, expires_at, now))
    nominated = PodGroupNominated(
        podgroup=_ref(preemptor), nodes=list(decision.nodes), expires_at=preempted.expires_at
    )
    _emit(uow, nominated, preemptor, now, cause)
    return conditions


def _victim_message(victim: Victim, preempted: Preempted, where: str) -> str:
    if victim.message:
        return victim.message
    preemptor = preempted.preemptor
    reason = VictimReason.SHRUNK if victim.shrunk else VictimReason.CHOSEN
    return reason.format(
        preemptor=f"{preemptor.namespace}/{preemptor.name}",
        preemptor_priority=preempted.priority,
        domain=where,
        priority=victim.owner.priority,
        min_count=victim.owner.min_count,
        pods=len(victim.pods),
    )


def _emit(uow: UnitOfWork, payload: EventPayload, group: GroupRef, now: datetime, cause: str | None) -> str:
    kind = "Pod" if group.standalone else "PodGroup"
    name = group.name.removeprefix(STANDALONE_PREFIX)
    envelope = Envelope.wrap(
        payload,
        producer=PRODUCER,
        correlation_id=group.uid,
        occurred_at=now,
        causation_id=cause,
        subject=AggregateRef(kind=kind, namespace=group.namespace, name=name, uid=group.uid),
    )
    uow.emit(envelope)
    return str(envelope.event_id)


def _disruption_target(uid: str, message: str) -> Condition:
    return Condition(
        object_uid=uid,
        type=ConditionType.DISRUPTION_TARGET,
        status="True",
        owner=PRODUCER,
        reason=ConditionReason.PREEMPTION_BY_SCHEDULER,
        message=message,
    )


def _ref(group: GroupRef) -> PodGroupRef:
    return PodGroupRef(namespace=group.namespace, name=group.name, uid=group.uid)


def _owner_ref(victim: Victim) -> PodGroupRef:
    owner = victim.owner
    return PodGroupRef(namespace=owner.namespace, name=owner.name, uid=owner.uid)


def _pod_ref(pod: RunningPod) -> PodRef:
    placement = pod.placement
    return PodRef(namespace=pod.namespace, name=placement.pod_name, uid=pod.uid, node=placement.node_name)
