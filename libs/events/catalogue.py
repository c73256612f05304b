"""The event catalogue and subject names: the one place every service, test and document takes them from."""

from __future__ import annotations

from enum import StrEnum

EVENTS_STREAM = "PODWAY_EVENTS"
WORK_STREAM = "PODWAY_WORK"
DLQ_STREAM = "PODWAY_DLQ"

EVENTS_PREFIX = "podway.events"
RPC_PREFIX = "podway.rpc"
WORK_PREFIX = "podway.work"
DLQ_PREFIX = "podway.dlq"


class EventType(StrEnum):
    """Every domain event Podway emits; the value is the subject suffix after `podway.events.`."""

    JOB_SUBMITTED = "job.submitted"
    WORKLOAD_ADMITTED = "workload.admitted"
    PODGROUP_ADMITTED = "podgroup.admitted"
    POD_ADMITTED = "pod.admitted"
    JOB_ADMITTED = "job.admitted"
    OBJECT_ADMITTED = "object.admitted"
    OBJECT_REJECTED = "object.rejected"
    OBJECT_DELETED = "object.deleted"
    JOB_EXPANDED = "job.expanded"
    JOB_FINISHED = "job.finished"
    NODE_REGISTERED = "node.registered"
    NODE_UPDATED = "node.updated"
    NODE_NOT_READY = "node.not_ready"
    NODE_READY = "node.ready"
    NODE_LOST = "node.lost"
    RESOURCESLICE_PUBLISHED = "resourceslice.published"
    PODGROUP_CYCLE_STARTED = "podgroup.cycle.started"
    PODGROUP_CYCLE_PLACED = "podgroup.cycle.placed"
    PODGROUP_UNSCHEDULABLE = "podgroup.unschedulable"
    PLACEMENT_PROPOSED = "placement.proposed"
    CLAIMS_ALLOCATED = "claims.allocated"
    CLAIMS_ALLOCATION_FAILED = "claims.allocation_failed"
    CLAIMS_RELEASED = "claims.released"
    PODS_BOUND = "pods.bound"
    PODGROUP_SCHEDULED = "podgroup.scheduled"
    COMPOSITEPODGROUP_SCHEDULED = "compositepodgroup.scheduled"
    COMPOSITEPODGROUP_UNSCHEDULABLE = "compositepodgroup.unschedulable"
    PREEMPTION_REQUESTED = "preemption.requested"
    PREEMPTION_VICTIMS_SELECTED = "preemption.victims_selected"
    PODS_EVICTED = "pods.evicted"
    PODGROUP_NOMINATED = "podgroup.nominated"
    PODGROUP_NOMINATION_CLEARED = "podgroup.nomination_cleared"
    PODGROUP_TIMED_OUT = "podgroup.timed_out"
    PODS_RUNNING = "pods.running"
    PODS_SUCCEEDED = "pods.succeeded"
    PODS_FAILED = "pods.failed"
    PODGROUP_RESTARTED = "podgroup.restarted"
    INFERENCE_COMPLETED = "inference.completed"
    INFERENCE_FAILED = "inference.failed"
    INFERENCE_FEEDBACK = "inference.feedback"
    ROUTER_SPILLOVER = "router.spillover"
    ROUTER_FAILOVER = "router.failover"
    ROUTER_BREAKER_OPENED = "router.breaker.opened"
    ROUTER_BREAKER_HALF_OPENED = "router.breaker.half_opened"
    ROUTER_BREAKER_CLOSED = "router.breaker.closed"
    ROUTER_POLICY_RELOADED = "router.policy.reloaded"
    ROUTER_EXPERIMENT_CONCLUDED = "router.experiment.concluded"

    @property
    def subject(self) -> str:
        return f"{EVENTS_PREFIX}.{self.value}"


class RpcSubject(StrEnum):
    """Core NATS request/reply subjects (no stream captures them)."""

    ADMISSION_APPLY = "podway.rpc.admission.apply"
    ADMISSION_DELETE = "podway.rpc.admission.delete"
    ADMISSION_GET = "podway.rpc.admission.get"
    ADMISSION_EVENTS = "podway.rpc.admission.events"
    ADMISSION_CHANGES = "podway.rpc.admission.changes"
    ROUTER_INFER = "podway.rpc.router.infer"
    NODE_AGENT_POWER = "podway.rpc.node_agent.power"


class WorkSubject(StrEnum):
    """Work-queue subjects in the PODWAY_WORK stream."""

    INFERENCE = "podway.work.inference"


def dlq_subject(consumer: str) -> str:
    """Where poison messages of one durable consumer go."""
    return f"{DLQ_PREFIX}.{consumer}"
