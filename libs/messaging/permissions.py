"""Which subjects each Podway NATS user may publish and subscribe to, and the nats-server config made of them.

`deploy/nats/nats-server.conf` is rendered from `USERS` (`python -m libs.messaging.permissions >
deploy/nats/nats-server.conf`; a unit test checks the file is current), so the config names subjects the way the
code does. Each user gets:

- its own domain events only, published by its outbox relay as JetStream publishes (the PubAck comes back to its
  inbox);
- the RPC subjects it serves, in its queue group only, and those it calls; a server answers into its callers'
  inboxes, which it may publish to by name;
- for each durable consumer it owns: create (every form of the JetStream API subject, all bound to the durable's
  name), info, pull (`MSG.NEXT`), acknowledge (`$JS.ACK.<stream>.<durable>.>`) and its dead-letter subject;
- `$JS.API.STREAM.INFO` of the streams it checks at start-up. Only the `migrate` user creates or updates streams;
- for each key-value bucket it keeps records in: its info, direct gets, and puts (compare-and-set, the PubAck
  to its inbox);
- its own inbox, `_INBOX.<user>.>`: `make_broker` gives each user that inbox prefix, so no user reads another's
  replies.

A durable's filter subjects travel in the create request's body, where subject permissions cannot see them: what
a user may consume is bounded by the durables it owns, not by subject.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from libs.events.catalogue import (
    DLQ_STREAM,
    EVENTS_PREFIX,
    EVENTS_STREAM,
    RPC_PREFIX,
    WORK_STREAM,
    EventType,
    RpcSubject,
    WorkSubject,
    dlq_subject,
)
from libs.events.inference import (
    INFERENCE_FEEDBACK_SUBJECT,
    ROUTER_EXPERIMENTS_BUCKET,
    ROUTER_EXPERIMENTS_STREAM,
    ROUTER_FLEET_STATUS_SUBJECT,
    ROUTER_LEDGER_BUCKET,
    ROUTER_LEDGER_STREAM,
    ROUTER_OUTCOMES_SUBJECT,
    ROUTER_SCOREBOARD_SUBJECT,
    ROUTER_STATUS_SUBJECT,
)

INBOX_PREFIX = "_INBOX"
JS_API = "$JS.API"


@dataclass(frozen=True)
class Durable:
    """A durable JetStream consumer that one user creates, pulls from and acknowledges."""

    stream: str
    name: str


@dataclass(frozen=True)
class Served:
    """Core request/reply subjects a user answers, as a member of one queue group (none: every server
    hears each request, and the one it concerns answers)."""

    subject: str
    queue: str


@dataclass(frozen=True)
class NatsUser:
    """One NATS user, in Podway's terms; `publish()` and `subscribe()` are its permissions in NATS's."""

    name: str
    role: str
    emits: tuple[EventType, ...] = ()
    enqueues: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    serves: tuple[Served, ...] = ()
    answers: tuple[str, ...] = ()
    durables: tuple[Durable, ...] = ()
    checks: tuple[str, ...] = ()
    provisions: tuple[str, ...] = ()
    watches: tuple[str, ...] = ()
    buckets: tuple[str, ...] = ()

    @property
    def password_variable(self) -> str:
        """The environment variable nats-server reads this user's password from."""
        return f"NATS_{self.name.upper()}_PASSWORD"

    @property
    def inbox(self) -> str:
        return f"{INBOX_PREFIX}.{self.name}.>"

    def publish(self) -> list[str]:
        subjects = [event.subject for event in self.emits]
        subjects += self.enqueues
        subjects += self.calls
        subjects += [f"{INBOX_PREFIX}.{caller}.>" for caller in self.answers]
        subjects += [f"{JS_API}.STREAM.INFO.{stream}" for stream in self.checks]
        for bucket in self.buckets:
            subjects += [
                f"$KV.{bucket}.>",
                f"{JS_API}.STREAM.INFO.KV_{bucket}",
                f"{JS_API}.DIRECT.GET.KV_{bucket}.>",
                f"{JS_API}.STREAM.MSG.GET.KV_{bucket}",
            ]
        for stream in self.provisions:
            subjects += [f"{JS_API}.STREAM.{verb}.{stream}" for verb in ("CREATE", "UPDATE", "INFO")]
        for durable in self.durables:
            consumer = f"{durable.stream}.{durable.name}"
            subjects += [
                f"{JS_API}.CONSUMER.CREATE.{consumer}",
                f"{JS_API}.CONSUMER.CREATE.{consumer}.>",
                f"{JS_API}.CONSUMER.DURABLE.CREATE.{consumer}",
                f"{JS_API}.CONSUMER.INFO.{consumer}",
                f"{JS_API}.CONSUMER.MSG.NEXT.{consumer}",
                f"$JS.ACK.{consumer}.>",
                dlq_subject(durable.name),
            ]
        return subjects

    def subscribe(self) -> list[str]:
        served = [f"{s.subject} {s.queue}" if s.queue else s.subject for s in self.serves]
        return [*served, *self.watches, self.inbox]


USERS: tuple[NatsUser, ...] = (
    NatsUser(
        name="admission",
        role="the API front door: apply/delete/get/events requests, Jobs submitted as events, deletions",
        emits=(
            EventType.WORKLOAD_ADMITTED,
            EventType.PODGROUP_ADMITTED,
            EventType.POD_ADMITTED,
            EventType.JOB_ADMITTED,
            EventType.OBJECT_ADMITTED,
            EventType.OBJECT_REJECTED,
            EventType.OBJECT_DELETED,
            EventType.JOB_EXPANDED,
            EventType.JOB_FINISHED,
            EventType.NODE_REGISTERED,
            EventType.NODE_UPDATED,
            EventType.RESOURCESLICE_PUBLISHED,
            EventType.PODS_EVICTED,  # deleting bound pods
        ),
        serves=(Served(f"{RPC_PREFIX}.admission.>", "admission"),),
        answers=("client", "node_agent", "api_server"),
        durables=(
            Durable(EVENTS_STREAM, "admission-jobs"),
            Durable(EVENTS_STREAM, "admission-pod-lifecycle"),
        ),
        checks=(EVENTS_STREAM, DLQ_STREAM),
    ),
    NatsUser(
        name="scheduler",
        role="gang scheduling cycles, bindings, preemption requests, gang restarts",
        emits=(
            EventType.PODGROUP_CYCLE_STARTED,
            EventType.PODGROUP_CYCLE_PLACED,
            EventType.PODGROUP_UNSCHEDULABLE,
            EventType.PLACEMENT_PROPOSED,
            EventType.PODS_BOUND,
            EventType.PODGROUP_SCHEDULED,
            EventType.COMPOSITEPODGROUP_SCHEDULED,
            EventType.COMPOSITEPODGROUP_UNSCHEDULABLE,
            EventType.PREEMPTION_REQUESTED,
            EventType.PODGROUP_TIMED_OUT,
            EventType.PODS_FAILED,  # pending pods of a gang that timed out
            EventType.PODS_EVICTED,  # a gang restarted after losing a pod
            EventType.PODGROUP_RESTARTED,
            EventType.NODE_NOT_READY,
            EventType.NODE_READY,
            EventType.NODE_LOST,
        ),
        durables=(Durable(EVENTS_STREAM, "scheduler"),),
        checks=(EVENTS_STREAM, DLQ_STREAM),
    ),
    NatsUser(
        name="preemptor",
        role="workload-aware preemption: victims, evictions, nominations",
        emits=(
            EventType.PREEMPTION_VICTIMS_SELECTED,
            EventType.PODS_EVICTED,
            EventType.PODGROUP_NOMINATED,
            EventType.PODGROUP_NOMINATION_CLEARED,
        ),
        durables=(Durable(EVENTS_STREAM, "preemptor"),),
        checks=(EVENTS_STREAM, DLQ_STREAM),
    ),
    NatsUser(
        name="dra_allocator",
        role="ResourceClaim allocation for proposed placements, release on termination or eviction",
        emits=(EventType.CLAIMS_ALLOCATED, EventType.CLAIMS_ALLOCATION_FAILED, EventType.CLAIMS_RELEASED),
        durables=(Durable(EVENTS_STREAM, "dra_allocator"),),
        checks=(EVENTS_STREAM, DLQ_STREAM),
    ),
    NatsUser(
        name="node_agent",
        role="the simulated kubelet: registers its cluster through admission, runs and stops bound pods",
        emits=(
            EventType.PODS_RUNNING,
            EventType.PODS_SUCCEEDED,
            EventType.PODS_FAILED,
            EventType.OBJECT_DELETED,  # pods it terminated
        ),
        calls=(RpcSubject.ADMISSION_APPLY, RpcSubject.ADMISSION_GET),
        serves=(Served(RpcSubject.NODE_AGENT_POWER, ""),),  # each agent hears it; the node's own answers
        answers=("client",),
        # One durable per agent instance (PODWAY_INSTANCE): list each instance a deployment runs.
        durables=(Durable(EVENTS_STREAM, "node-agent-0"),),
        checks=(EVENTS_STREAM, DLQ_STREAM),
    ),
    NatsUser(
        name="llm_router",
        role="sync and async inference, feedback, the scoreboard; routing audit events",
        emits=(
            EventType.INFERENCE_COMPLETED,
            EventType.INFERENCE_FAILED,
            EventType.INFERENCE_FEEDBACK,
            EventType.ROUTER_SPILLOVER,
            EventType.ROUTER_FAILOVER,
            EventType.ROUTER_BREAKER_OPENED,
            EventType.ROUTER_BREAKER_HALF_OPENED,
            EventType.ROUTER_BREAKER_CLOSED,
            EventType.ROUTER_POLICY_RELOADED,
            EventType.ROUTER_EXPERIMENT_CONCLUDED,
        ),
        serves=(
            Served(f"{RPC_PREFIX}.router.>", "llm_router"),
            Served(ROUTER_FLEET_STATUS_SUBJECT, ""),  # every process answers: the fleet's status
            Served(INFERENCE_FEEDBACK_SUBJECT, "llm_router"),
        ),
        answers=("client",),
        calls=(ROUTER_OUTCOMES_SUBJECT,),
        watches=(ROUTER_OUTCOMES_SUBJECT,),
        durables=(Durable(WORK_STREAM, "llm-router-inference"),),
        checks=(EVENTS_STREAM, WORK_STREAM, DLQ_STREAM),
        buckets=(ROUTER_LEDGER_BUCKET, ROUTER_EXPERIMENTS_BUCKET),
    ),
    NatsUser(
        name="client",
        role="the podway CLI and the Python client: requests, submitted Jobs, async inference, watching events",
        emits=(EventType.JOB_SUBMITTED,),
        enqueues=(WorkSubject.INFERENCE,),
        calls=(
            RpcSubject.ADMISSION_APPLY,
            RpcSubject.ADMISSION_DELETE,
            RpcSubject.ADMISSION_GET,
            RpcSubject.ADMISSION_EVENTS,
            RpcSubject.ADMISSION_CHANGES,
            RpcSubject.ROUTER_INFER,
            RpcSubject.NODE_AGENT_POWER,
            ROUTER_SCOREBOARD_SUBJECT,
            ROUTER_STATUS_SUBJECT,
            ROUTER_FLEET_STATUS_SUBJECT,
            INFERENCE_FEEDBACK_SUBJECT,
        ),
        watches=(f"{EVENTS_PREFIX}.>",),
    ),
    NatsUser(
        name="api_server",
        role="the Kubernetes REST API: reads, writes and watches through admission's requests",
        calls=(
            RpcSubject.ADMISSION_APPLY,
            RpcSubject.ADMISSION_DELETE,
            RpcSubject.ADMISSION_GET,
            RpcSubject.ADMISSION_CHANGES,
        ),
    ),
    NatsUser(
        name="migrate",
        role="the admin step (`podway migrate`): creates and updates the streams before services start",
        provisions=(EVENTS_STREAM, WORK_STREAM, DLQ_STREAM, ROUTER_LEDGER_STREAM, ROUTER_EXPERIMENTS_STREAM),
    ),
)


def user(name: str) -> NatsUser:
    """The user called `name`."""
    return next(u for u in USERS if u.name == name)


def emitted_subjects(user_name: str | None) -> frozenset[str] | None:
    """The event subjects NATS user `user_name` may publish; None (no limit to follow) without a user, or for
    a user these permissions do not define."""
    found = next((u for u in USERS if u.name == user_name), None)
    return None if found is None else frozenset(event.subject for event in found.emits)


HEADER = """\
# NATS for a Podway deployment: JetStream on, one user per service with least-privilege subjects.
# Rendered from libs/messaging/permissions.py (python -m libs.messaging.permissions > deploy/nats/nats-server.conf);
# edit that, not this file. Passwords come from the environment, NATS_<USER>_PASSWORD (bcrypt them for production);
# nats-server parses a variable's value like a config value, so a password must not start with a digit.
port: 4222
http_port: 8222
jetstream {
  store_dir: /data/jetstream
  max_file_store: 20GB
  # fsync every write before acknowledging it: an acknowledged event survives a crash of the server or the
  # host (the default syncs every 2 minutes, and loses acknowledged messages on a crash).
  sync_interval: always
}
"""


def render(users: tuple[NatsUser, ...] = USERS) -> str:
    """The nats-server configuration for `users`."""
    lines = [HEADER, "accounts {", "  PODWAY {", "    jetstream: enabled", "    users: ["]
    for entry in users:
        lines.append(f"      # {entry.name}: {entry.role}")
        lines.append(f"      {{user: {entry.name}, password: ${entry.password_variable}, permissions: {{")
        lines += _subjects("publish", entry.publish())
        lines += _subjects("subscribe", entry.subscribe())
        lines.append("      }}")
    lines += [
        "    ]",
        "  }",
        "  SYS { users: [{user: sys, password: $NATS_SYS_PASSWORD}] }",
        "}",
        "system_account: SYS",
        "",
    ]
    return "\n".join(lines)


def _subjects(verb: str, subjects: list[str]) -> list[str]:
    return [f"        {verb}: [", *(f'          "{subject}"' for subject in subjects), "        ]"]


if __name__ == "__main__":
    sys.stdout.write(render())
