"""The admission service: the API front door. Answers apply / delete / get / events requests, admits Jobs
submitted as events, syncs Jobs as the Job controller does when they or their pods change, and completes
PodGroup deletions once their pods have finished."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, NamedTuple

from libs.api.errors import conflict_status, internal_error_status
from libs.api.limits import check_document_shape
from libs.core.admission.apply import (
    ApplyContext,
    PreparedBatch,
    admit_batch,
    admit_submission,
    prepare_batch,
    raw_key,
    write_runs,
)
from libs.core.admission.delete import (
    decide_delete,
    decide_namespace_delete,
    finish_namespace_deletions,
    finish_pending_deletions,
    held_back,
)
from libs.core.admission.model import AdmissionView, BatchDecision, KnownObject, ObjectKey
from libs.db.direct import DirectConnections
from libs.db.engine import create_engine, create_session_factory, dispose_snapshot, snapshot_engine
from libs.db.errors import ConflictError
from libs.db.ports import UnitOfWork
from libs.db.reachability import database_check
from libs.db.records import Condition, ObjectDraft, OutboxMessage, StoredObject
from libs.db.repositories.objects import OBJECT_MODIFIED
from libs.db.uow import SqlAlchemyStatements, statements_factory, unit_of_work_factory
from libs.events.admission import JobSubmitted, ObjectDeleted
from libs.events.catalogue import EventType, RpcSubject
from libs.events.envelope import Envelope, EventPayload
from libs.events.rpc import (
    ApplyReply,
    ApplyRequest,
    ChangesRequest,
    DeleteRequest,
    EventsReply,
    EventsRequest,
    GetRequest,
    ObjectResult,
    encode_framed,
    encode_objects,
)
from libs.events.scheduling import (
    PodGroupRef,
    PodGroupRestarted,
    PodRef,
    PodsFailed,
    PodsRunning,
    PodsSucceeded,
    PreemptionVictimsSelected,
)
from libs.kubeapi.resources import RESOURCES
from libs.leasing.retention import RetentionSchedule, policy_from
from libs.messaging.broker import bus_state, jetstream, make_broker, start_broker
from libs.messaging.consumer import EventConsumer
from libs.messaging.readiness import connection_states
from libs.messaging.relay import OutboxRelay
from libs.messaging.rpc import serve_rpc
from libs.runtime.clock import Clock, utc_now
from libs.runtime.health import beat_forever, health_file
from libs.runtime.metrics import LIST_STORES
from libs.runtime.settings import PodwaySettings
from libs.runtime.shutdown import bounded, cancel_tasks
from services.admission import jobs, queries
from services.admission.batcher import ApplyBatcher, Footprint
from services.admission.queries import WriterKnows
from services.admission.store import (
    AtOnce,
    Written,
    iso,
    known_from_stored,
    load_view,
    load_view_and_conditions,
    write_decision,
    writes_at_once,
)
from services.admission.stored_cache import StoredManifests

log = logging.getLogger(__name__)

SERVICE = "admission"

CONFLICT_RETRIES = 5
NAMESPACED_KINDS = tuple(
    dict.fromkeys(
        r.kind for r in RESOURCES if r.namespaced and r.kind != "Event" and r.group != "events.k8s.io"
    )
)
"""What a namespace holds (events are the audit log's, not objects in it)."""
APPLY_IN_FLIGHT = 256
#: Group commits in flight at once on PostgreSQL (SQLite has one writer: there a second would only queue).
APPLY_PIPELINE_DEPTH = 2
#: ... once this many applies wait (fewer go in the next group: see ApplyBatcher).
APPLY_OVERLAP_FROM = 16
#: Reads answered at once on PostgreSQL, each on a pooled connection of its own: a read waits on a few round
#: trips, and others proceed meanwhile (SQLite's transactions queue on its one lock: there one at a time).
READS_IN_FLIGHT = 4
#: Pods created encoded for lists at a time once applies pause (a list's page: about 7 ms of work, which an
#: apply arriving meanwhile waits at most; smaller chunks cost more each, their read and unit of work being
#: most of a chunk of 100), and how long applies must have paused.
ENCODE_CHUNK = 500
ENCODE_WHEN_IDLE_S = 0.05


class PreparedApply(NamedTuple):
    """An apply request converted on arrival, waiting for its group commit."""

    request_id: str
    batch: PreparedBatch
    expected_revision: int | None = None
    read_back: bool = False


class AdmissionService:
    """Wiring only: every decision is made by libs.core.admission."""

    def __init__(
        self,
        settings: PodwaySettings,
        *,
        clock: Clock = utc_now,
        new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        if not settings.nats_url:
            raise ValueError("the admission service needs PODWAY_NATS_URL")
        self.settings = settings
        self.clock = clock
        self.new_uid = new_uid
        self.engine = create_engine(settings.resolved_database_url())
        self.sessions = create_session_factory(self.engine)
        self.snapshot_engine = snapshot_engine(settings.resolved_database_url(), self.engine)
        self.broker = make_broker(settings.nats_url, f"admission-{settings.instance}")
        self.relay: OutboxRelay | None = None
        self.uow = unit_of_work_factory(self.sessions, clock=clock, after_commit=self._kick_relay)
        # A group's view and its write go on connections of their own (see libs.db.direct): one per group
        # in flight.
        self.direct = (
            DirectConnections(self.engine, size=APPLY_PIPELINE_DEPTH) if self._reads_back_in_writer else None
        )
        self.statements = (
            statements_factory(self.engine, clock=clock, after_commit=self._kick_relay, direct=self.direct)
            if self._reads_back_in_writer
            else None
        )
        self.stored = StoredManifests(kept=settings.admission_kept_objects)
        LIST_STORES.track(SERVICE, self.stored)
        self._unlisted = asyncio.Event()
        self.batcher: ApplyBatcher[PreparedApply] = ApplyBatcher(
            self._apply_group,
            footprint_of=_footprint_of,
            depth=1 if self.engine.dialect.name == "sqlite" else APPLY_PIPELINE_DEPTH,
            overlap_from=APPLY_OVERLAP_FROM,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._wire()

    def _kick_relay(self, committed: Sequence[OutboxMessage]) -> None:
        if self.relay is not None:
            self.relay.kick(committed)

    def _wire(self) -> None:
        # Applies wait for their group commit, so many must be in flight at once for groups to form.
        serve_rpc(
            self.broker,
            RpcSubject.ADMISSION_APPLY,
            self.on_apply,
            queue="admission",
            max_in_flight=APPLY_IN_FLIGHT,
        )
        serve_rpc(self.broker, RpcSubject.ADMISSION_DELETE, self.on_delete, queue="admission")
        serve_rpc(
            self.broker,
            RpcSubject.ADMISSION_GET,
            self.on_get,
            queue="admission",
            max_in_flight=1 if self.engine.dialect.name == "sqlite" else READS_IN_FLIGHT,
        )
        serve_rpc(self.broker, RpcSubject.ADMISSION_EVENTS, self.on_events, queue="admission")
        serve_rpc(self.broker, RpcSubject.ADMISSION_CHANGES, self.on_changes, queue="admission")
        self.consumers = [
            EventConsumer(
                name="admission-jobs",
                subjects=[EventType.JOB_SUBMITTED.subject],
                handler=self.on_job_submitted,
                uow_factory=self.uow,
                batch_size=32,
            ),
            EventConsumer(
                name="admission-pod-lifecycle",
                subjects=[
                    EventType.PODS_RUNNING.subject,
                    EventType.PODS_SUCCEEDED.subject,
                    EventType.PODS_FAILED.subject,
                    EventType.OBJECT_DELETED.subject,
                    EventType.PODGROUP_RESTARTED.subject,
                    EventType.PREEMPTION_VICTIMS_SELECTED.subject,
                    # The DRA allocator deletes the claims it releases: a namespace may be empty then.
                    EventType.CLAIMS_RELEASED.subject,
                ],
                batch_handler=self.on_pod_lifecycle,
                uow_factory=self.uow,
                batch_size=64,
                on_reset=self.reconcile,
            ),
        ]
        for consumer in self.consumers:
            consumer.subscribe(self.broker)

    async def start(self) -> None:
        await start_broker(self.broker, self.consumers)
        self.relay = OutboxRelay(
            self.uow,
            jetstream(self.broker),
            clock=self.clock,
            snapshot=unit_of_work_factory(create_session_factory(self.snapshot_engine), clock=self.clock),
        )
        self._tasks = [
            asyncio.create_task(self.relay.run(), name="outbox-relay"),
            asyncio.create_task(self.batcher.run(), name="apply-batcher"),
            asyncio.create_task(self._encode_for_lists(), name="encode-for-lists"),
        ]
        if self.settings.retention_interval_seconds > 0:
            retention = RetentionSchedule(
                self.uow,
                policy_from(self.settings),
                holder=f"admission-{self.settings.instance}-{uuid.uuid4().hex[:6]}",
                interval_s=self.settings.retention_interval_seconds,
                clock=self.clock,
            )
            self._tasks.append(asyncio.create_task(retention.run(), name="retention"))
        if self.settings.data_dir:
            beacon = health_file(Path(self.settings.run_dir), SERVICE)
            self._tasks.append(
                asyncio.create_task(
                    beat_forever(
                        beacon,
                        alive=self.connected,
                        connections=connection_states(self.broker, database_check(self.engine)),
                    ),
                    name="health",
                )
            )
        log.info("admission ready", extra={"nats": self.settings.nats_url})

    async def stop(self) -> None:
        """Stop in bounded time: a step that hangs on a dead peer is logged and left behind."""
        await cancel_tasks(self._tasks, service=SERVICE)
        for consumer in self.consumers:
            await bounded(consumer.stop(), "stopping a consumer", service=SERVICE)
        await bounded(self.broker.stop(), "stopping the broker", service=SERVICE)
        if self.direct is not None:
            await bounded(self.direct.close(), "closing the direct connections", service=SERVICE)
        await bounded(self.engine.dispose(), "closing the database pool", service=SERVICE)
        await bounded(
            dispose_snapshot(self.snapshot_engine, self.engine), "closing the snapshot pool", service=SERVICE
        )

    def connected(self) -> bool:
        """Whether the service's NATS connection is up or coming back (not closed for good)."""
        return bus_state(self.broker) != "closed"

    # --- apply -------------------------------------------------------------------------------------

    async def on_apply(self, body: bytes) -> ApplyReply:
        request = ApplyRequest.model_validate_json(body)
        for position, manifest in enumerate(request.manifests):
            check_document_shape(manifest, position)  # refused whole, as the API server refuses a body
        # Converted here, as requests arrive, so that it overlaps the group commit in progress.
        batch = prepare_batch(
            request.manifests, create_only=request.create_only, field_validation=request.field_validation
        )
        prepared = PreparedApply(request.request_id, batch, request.expected_revision, request.read_back)
        if request.dry_run:
            return await self._dry_run(prepared)
        return await self.batcher.submit(prepared)

    async def _read_back(self, requests: list[PreparedApply], replies: list[ApplyReply]) -> list[ApplyReply]:
        """Each object a group wrote (or left unchanged) for the requests that asked, as `get` reads it now
        that it is committed: one read for the whole group. A read that fails leaves the answers without the
        objects (what was written stays written; the caller reads them itself)."""
        wanted = [reply for request, reply in zip(requests, replies, strict=True) if request.read_back]
        keys = {key for reply in wanted for result in reply.results if (key := _readable_key(result))}
        if not keys:
            return replies
        try:
            async with self.uow() as uow:
                found = await queries.read_back(uow, keys)
        except Exception:
            log.exception("reading back %d objects written failed", len(keys))
            return replies
        return [
            _with_objects(reply, found) if request.read_back else reply
            for request, reply in zip(requests, replies, strict=True)
        ]

    async def _dry_run(self, prepared: PreparedApply) -> ApplyReply:
        request_id, batch, *_ = prepared
        async with self.uow() as uow:
            view = await load_view(uow, batch.keys)
        decision = admit_batch(batch, view, self._context(request_id))
        return ApplyReply(request_id=request_id, results=decision.results, warnings=decision.warnings)

    async def _apply_group(self, requests: list[PreparedApply]) -> list[ApplyReply]:
        """Decide and write a group of applies in one transaction and read back what they wrote: on
        PostgreSQL in that transaction (revisions are taken as rows are written), elsewhere once it is
        committed (the revision is stamped at commit)."""
        replies = await self._apply_split_on_failure(requests)
        return replies if self._reads_back_in_writer else await self._read_back(requests, replies)

    @property
    def _reads_back_in_writer(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    async def _apply_split_on_failure(self, requests: list[PreparedApply]) -> list[ApplyReply]:
        """A conflict re-reads and decides again. A group that still fails, for any reason, is split and its
        requests applied one by one, so that only a request that fails alone is answered with the error."""
        try:
            return await self._apply_retrying_conflicts(requests)
        except Exception as error:
            if len(requests) == 1:
                log.exception("apply %s failed", requests[0].request_id)
                return [_failed_reply(requests[0], error)]
            log.warning("apply group of %d failed (%s); applying one by one", len(requests), error)
        return [reply for r in requests for reply in await self._apply_split_on_failure([r])]

    async def _apply_retrying_conflicts(self, requests: list[PreparedApply]) -> list[ApplyReply]:
        for attempt in range(CONFLICT_RETRIES - 1):
            try:
                return await self._apply_once(requests)
            except ConflictError:
                log.info("apply conflict; retrying", extra={"attempt": attempt + 1})
        return await self._apply_once(requests)

    async def _apply_once(self, requests: list[PreparedApply]) -> list[ApplyReply]:
        keys = set().union(*(r.batch.keys for r in requests))
        if self.statements is None:
            async with self.uow() as uow:
                view, conditions = await load_view_and_conditions(uow, keys)
                return await self._write_group(
                    uow, requests, _Decided.of(self, requests, keys, view, conditions)
                )
        async with self.statements() as reading:
            # Read outside a transaction: a transaction reading first (READ COMMITTED) sees no more than
            # this, and a change committed since fails the precondition or the write's compare-and-set.
            view, conditions = await load_view_and_conditions(reading, keys)
            decided = _Decided.of(self, requests, keys, view, conditions)
            at_once = writes_at_once(decided.decisions, now=self.clock())
            if at_once is not None and not _syncs_jobs(decided.decisions):
                return await self._write_at_once(reading, requests, decided, at_once)
        async with self.uow() as uow:
            return await self._write_group(uow, requests, decided)

    async def _write_group(
        self, uow: UnitOfWork, requests: list[PreparedApply], decided: _Decided
    ) -> list[ApplyReply]:
        """Write the group's decisions in the unit of work, read back what they wrote and commit."""
        written = Written([], [])
        for run in write_runs(decided.decisions):
            one = await write_decision(uow, run, now=self.clock())
            written.objects.extend(one.objects)
            written.created.extend(one.created)
        synced = bool(decided.live) and await self._sync_applied_jobs(
            uow, decided.decisions, self._context(decided.live[0].request_id)
        )
        replies = decided.replies()
        if self._reads_back_in_writer:
            # A Job synced may have written again what the group wrote: read it all then.
            knows = WriterKnows() if synced else decided.knows(written)
            await self._read_back_in(uow, [r for r in decided.live if r.read_back], replies, knows)
        await uow.commit()
        self._keep_created(written.created)
        return decided.answers(requests, replies)

    async def _write_at_once(
        self, reading: SqlAlchemyStatements, requests: list[PreparedApply], decided: _Decided, at_once: AtOnce
    ) -> list[ApplyReply]:
        """Write the group's decisions in one statement (committed by it), then read back what they wrote."""
        done = await reading.write_at_once(at_once.creates, at_once.replacements, at_once.events)
        written = Written([*done.created, *done.replaced], done.created)
        replies = decided.replies()
        await self._read_back_in(
            reading, [r for r in decided.live if r.read_back], replies, decided.knows(written)
        )
        self._keep_created(written.created)
        return decided.answers(requests, replies)

    def _keep_created(self, created: list[StoredObject]) -> None:
        self.stored.keep_created(created)
        if self.stored.has_unlisted():
            self._unlisted.set()

    async def _encode_for_lists(self) -> None:
        """Encode the pods created since, as lists will show them, once applies pause (see stored_cache.py):
        a chunk at a time, so that an apply arriving meanwhile waits for one chunk at most. Not between the
        groups of a stream of applies: each chunk reads what its pods derive, which would cost the stream a
        read per group."""
        while True:
            await self._unlisted.wait()
            self._unlisted.clear()
            while self.stored.has_unlisted():
                started = self.batcher.groups_started
                await asyncio.sleep(ENCODE_WHEN_IDLE_S)
                while self.stored.has_unlisted() and self._applies_paused_since(started):
                    try:
                        async with self.uow() as uow:
                            await queries.encode_unlisted_pods(uow, self.stored, ENCODE_CHUNK)
                    except Exception:  # the next list encodes what this could not
                        log.warning("encoding pods for lists failed", exc_info=True)
                        break
                    await asyncio.sleep(0)  # what arrived meanwhile goes first

    def _applies_paused_since(self, started: int) -> bool:
        """Whether no apply group started since the batcher had started `started` and none is written now."""
        return self.batcher.idle and self.batcher.groups_started == started

    async def _read_back_in(
        self, uow: UnitOfWork, asking: list[PreparedApply], replies: dict[int, ApplyReply], knows: WriterKnows
    ) -> None:
        """The objects the requests `asking` wrote (or left unchanged), read in the writing transaction."""
        keys = {key for r in asking for result in replies[id(r)].results if (key := _readable_key(result))}
        if not keys:
            return
        found = await queries.read_back(uow, keys, knows)
        for request in asking:
            replies[id(request)] = _with_objects(replies[id(request)], found)

    async def _sync_applied_jobs(
        self, uow: UnitOfWork, decisions: Sequence[BatchDecision], ctx: ApplyContext
    ) -> bool:
        """Jobs applied are synced at once (a suspension or a resumption acts now); a PriorityClass applied
        may let a Job whose wave admission refused create it now. Whether any Job was synced."""
        if not _syncs_jobs(decisions):
            return False
        writes = [write for decision in decisions for write in decision.writes]
        applied = {(w.namespace, w.name) for w in writes if w.kind == "Job"}
        if any(w.kind == "PriorityClass" for w in writes):
            applied |= await jobs.jobs_failing_to_create(uow)
        await jobs.sync_jobs(uow, applied, ctx, None)
        return bool(applied)

    def _context(self, request_id: str) -> ApplyContext:
        return ApplyContext(now=self.clock(), new_uid=self.new_uid, request_id=request_id)

    async def on_job_submitted(self, envelope: Envelope, payload: EventPayload, uow: UnitOfWork) -> None:
        assert isinstance(payload, JobSubmitted)
        batch = prepare_batch([payload.manifest])
        view = await load_view(uow, batch.keys)
        decision = admit_submission(batch, view, self._context(payload.request_id))
        uow.record(envelope)  # a client published it: the log keeps what the admission answers
        await write_decision(uow, decision, now=self.clock(), causation_id=str(envelope.event_id))
        await self._sync_applied_jobs(uow, [decision], self._context(payload.request_id))

    # --- delete ------------------------------------------------------------------------------------

    async def on_delete(self, body: bytes) -> ApplyReply:
        """A delete decided on what is stored now, read again while it conflicts; a Namespace with everything
        in it, in one transaction (see `decide_namespace_delete`)."""
        request = DeleteRequest.model_validate_json(body)
        once = self._delete_namespace_once if request.kind == "Namespace" else self._delete_once
        for _ in range(CONFLICT_RETRIES - 1):
            with contextlib.suppress(ConflictError):
                return await once(request)
        try:
            return await once(request)
        except ConflictError as error:
            return _conflict_reply(request, str(error))

    async def _delete_namespace_once(self, request: DeleteRequest) -> ApplyReply:
        async with self.uow() as uow:
            contents = [
                known_from_stored(o)
                for kind in NAMESPACED_KINDS
                for o in await uow.objects.find(kind, request.name)
            ]
            stored = await uow.objects.get("Namespace", "", request.name)
            pods = [o.uid for o in contents if o.kind == "Pod"]
            bound = {b.pod_uid: b.node_name for b in await uow.bindings.get_many(pods)}
            namespace = known_from_stored(stored) if stored is not None else None
            now = iso(self.clock())
            decision = decide_namespace_delete(
                request.name, namespace, contents, bound, request.request_id, now=now
            )
            if namespace is None and held_back(decision):
                # Something in it waits for its pods: the namespace is stored, to stay Terminating until it
                # is empty and then go where its watchers see it go (kubectl delete waits for that).
                [created] = await uow.objects.create_many([_namespace_draft(request.name)])
                namespace = known_from_stored(created)
                decision = decide_namespace_delete(
                    request.name, namespace, contents, bound, request.request_id, now=now
                )
            await write_decision(uow, decision, now=self.clock())
            await uow.commit()
        return ApplyReply(request_id=request.request_id, results=decision.results)

    async def _delete_once(self, request: DeleteRequest) -> ApplyReply:
        """Decide the delete on what is stored now and write it, on the preconditions it read."""
        key = (request.kind, request.namespace or "", request.name)
        async with self.uow() as uow:
            view = await load_view(uow, [key])
            scope = [known_from_stored(o) for o in await queries.namespace_objects(uow, key[1])]
            pods = [o.uid for o in scope if o.kind == "Pod"]
            bound = {b.pod_uid: b.node_name for b in await uow.bindings.get_many(pods)}
            decision = decide_delete(
                key,
                view,
                scope,
                bound,
                request.request_id,
                now=iso(self.clock()),
                propagation=request.propagation,
                grace_seconds=request.grace_seconds,
            )
            await write_decision(uow, decision, now=self.clock())
            await uow.commit()
        return ApplyReply(request_id=request.request_id, results=decision.results)

    async def on_pod_lifecycle(
        self, events: Sequence[tuple[Envelope, EventPayload]], uow: UnitOfWork
    ) -> None:
        """Pods changing phase or going, and gangs restarted or preempted, sync their Jobs (status, next
        wave, replacement of a stopped gang); pods finishing or going, and claims released, may let
        PodGroups, Jobs and Namespaces marked for deletion go. Once per batch, caused by the batch's last
        event."""
        cause = str(events[-1][0].event_id)
        pods: list[PodRef] = []
        groups: list[PodGroupRef] = []
        deleted: list[tuple[str, str]] = []
        for _, payload in events:
            if isinstance(payload, PodsRunning | PodsSucceeded | PodsFailed):
                pods += payload.pods
            elif isinstance(payload, PodGroupRestarted):
                groups.append(payload.podgroup)
            elif isinstance(payload, PreemptionVictimsSelected):
                groups += payload.victim_groups
            elif isinstance(payload, ObjectDeleted) and payload.kind == "Pod":
                deleted.append((payload.namespace or "", payload.name))
        owners = await jobs.jobs_of_pods(uow, pods) | await jobs.jobs_of_groups(uow, groups)
        owners |= await jobs.jobs_named_by_pods(uow, deleted)
        await jobs.sync_jobs(uow, owners, self._context(cause), cause)
        await self._finish_deletions(uow, cause)

    async def _finish_deletions(self, uow: UnitOfWork, cause: str | None) -> None:
        marked = [
            known_from_stored(o) for o in await uow.objects.find_marked(("PodGroup", "Job", "Namespace"))
        ]
        namespaces = [o for o in marked if o.kind == "Namespace"]
        await self._finish_held(uow, [o for o in marked if o.kind != "Namespace"], cause)
        if namespaces:  # after the objects that went just now
            occupied = set(await uow.objects.namespaces())  # what lists them as holding objects
            decision = finish_namespace_deletions(namespaces, occupied, request_id=cause or "reconcile")
            await write_decision(uow, decision, now=self.clock(), causation_id=cause)

    async def _finish_held(self, uow: UnitOfWork, marked: list[KnownObject], cause: str | None) -> None:
        """PodGroups and Jobs marked for deletion that nothing holds any more go now."""
        if not marked:
            return
        scope = [
            known_from_stored(o)
            for namespace in sorted({obj.namespace for obj in marked})
            for o in await queries.namespace_objects(uow, namespace)
        ]
        pods = [o.uid for o in scope if o.kind == "Pod"]
        bound = {b.pod_uid: b.node_name for b in await uow.bindings.get_many(pods)}
        decision = finish_pending_deletions(marked, scope, bound, request_id=cause or "reconcile")
        await write_decision(uow, decision, now=self.clock(), causation_id=cause)

    async def reconcile(self) -> None:
        """Re-derive from the database what lost pod events would have done: Job statuses, and objects
        marked for deletion whose dependents are gone."""
        async with self.uow() as uow:
            await jobs.sync_jobs(uow, await jobs.every_job(uow), self._context("reconcile"), None)
            await self._finish_deletions(uow, None)
            await uow.commit()

    # --- reads -------------------------------------------------------------------------------------

    async def on_get(self, body: bytes) -> bytes:
        request = GetRequest.model_validate_json(body)
        async with self.uow() as uow:
            reply = await queries.get_objects(uow, request, self.stored, encoded=True)
        return encode_framed(reply) if request.framed else encode_objects(reply)

    async def on_changes(self, body: bytes) -> bytes:
        request = ChangesRequest.model_validate_json(body)
        async with self.uow() as uow:
            return encode_objects(await queries.changes(uow, request))

    async def on_events(self, body: bytes) -> EventsReply:
        request = EventsRequest.model_validate_json(body)
        async with self.uow() as uow:
            return await queries.events(uow, request)


def _writer_knows(
    view: AdmissionView,
    keys: AbstractSet[ObjectKey],
    written: Written,
    conditions: dict[str, list[Condition]],
) -> WriterKnows:
    """`keys`: those the view was loaded for (`load_view` reads the bindings of the pods among them and the
    conditions of every object among them); what the group created has neither."""
    pods_read = {known.uid for key in keys if key[0] == "Pod" and (known := view.get(key)) is not None}
    created = {o.uid for o in written.created}
    return WriterKnows(
        written={(o.kind, o.namespace, o.name): o for o in written.objects},  # the last write of each
        conditions={**conditions, **{uid: [] for uid in created}},
        bindings=view.nodes_of_pods,  # of the pods read by key only
        bindings_read=pods_read | created,
    )


def _readable_key(result: ObjectResult) -> ObjectKey | None:
    if result.outcome not in ("created", "updated", "unchanged") or not result.kind or not result.name:
        return None
    return (result.kind, result.namespace or "", result.name)


def _with_objects(reply: ApplyReply, found: dict[ObjectKey, tuple[dict[str, Any], int]]) -> ApplyReply:
    results = []
    for result in reply.results:
        key = _readable_key(result)
        if key is not None and key in found:
            manifest, revision = found[key]
            result = result.model_copy(update={"object": manifest, "revision": revision})
        results.append(result)
    return reply.model_copy(update={"results": results})


def _stale(view: AdmissionView, prepared: PreparedApply) -> ApplyReply | None:
    """The 409 answer to an update whose object no longer has the revision its caller read, else None (the
    view was read in the transaction that writes: a change committed after it fails the write's own
    compare-and-set)."""
    if prepared.expected_revision is None or len(prepared.batch.documents) != 1:
        return None
    key = raw_key(prepared.batch.documents[0])
    if key is None:
        return None
    kind, namespace, name = key
    stored = view.get(key)
    if stored is not None and stored.revision == prepared.expected_revision:
        return None
    detail = OBJECT_MODIFIED if stored is not None else "the object does not exist"
    return _conflict_reply(
        DeleteRequest(request_id=prepared.request_id, kind=kind, namespace=namespace, name=name), detail
    )


def _namespace_draft(name: str) -> ObjectDraft:
    return ObjectDraft(
        kind="Namespace", api_version="v1", namespace="", name=name, spec={}, metadata={"name": name}
    )


def _conflict_reply(request: DeleteRequest, detail: str) -> ApplyReply:
    """A delete whose object kept changing under it, answered as the API server answers (409 Conflict)."""
    status = conflict_status(request.kind, request.name, detail)
    result = ObjectResult(
        kind=request.kind,
        namespace=request.namespace or None,
        name=request.name,
        outcome="rejected",
        message=status["message"],
        status=status,
    )
    return ApplyReply(request_id=request.request_id, results=[result])


def _failed_reply(prepared: PreparedApply, error: Exception) -> ApplyReply:
    """Every manifest of a request the server failed to write, answered as the API server answers an
    internal error (nothing of it was written)."""
    cause = str(getattr(error, "orig", None) or error).splitlines()[0][:300]
    message = f"Internal error occurred: {type(error).__name__}: {cause}"
    results = []
    for doc in prepared.batch.documents:
        kind, namespace, name = raw_key(doc) or (str(doc.get("kind") or "") or None, "", "")
        results.append(
            ObjectResult(
                kind=kind or None,
                namespace=namespace or None,
                name=name or None,
                outcome="rejected",
                message=message,
                status=internal_error_status(message),
            )
        )
    return ApplyReply(request_id=prepared.request_id, results=results)


class _Decided(NamedTuple):
    """A group's requests decided on one view: those refused as stale (answered already), the live ones and
    their decisions."""

    view: AdmissionView
    keys: set[ObjectKey]
    conditions: dict[str, list[Condition]]
    stale: dict[int, ApplyReply]
    live: list[PreparedApply]
    decisions: list[BatchDecision]

    @classmethod
    def of(
        cls,
        service: AdmissionService,
        requests: list[PreparedApply],
        keys: set[ObjectKey],
        view: AdmissionView,
        conditions: dict[str, list[Condition]],
    ) -> _Decided:
        # After the view is read: a change committed since fails the precondition or the write's own
        # compare-and-set, never neither.
        stale = {id(r): reply for r in requests if (reply := _stale(view, r)) is not None}
        live = [r for r in requests if id(r) not in stale]
        decisions = [admit_batch(r.batch, view, service._context(r.request_id)) for r in live]
        return cls(view, keys, conditions, stale, live, decisions)

    def replies(self) -> dict[int, ApplyReply]:
        return {
            id(r): ApplyReply(request_id=r.request_id, results=d.results, warnings=d.warnings)
            for r, d in zip(self.live, self.decisions, strict=True)
        }

    def knows(self, written: Written) -> WriterKnows:
        return _writer_knows(self.view, self.keys, written, self.conditions)

    def answers(self, requests: list[PreparedApply], replies: dict[int, ApplyReply]) -> list[ApplyReply]:
        return [self.stale.get(id(r)) or replies[id(r)] for r in requests]


SYNCS_JOBS = frozenset({"Job", "PriorityClass"})
"""Kinds whose write syncs Jobs in the same transaction (see `_sync_applied_jobs`)."""


def _syncs_jobs(decisions: Sequence[BatchDecision]) -> bool:
    return any(w.kind in SYNCS_JOBS for decision in decisions for w in decision.writes)


def _footprint_of(prepared: PreparedApply) -> Footprint | None:
    """What an apply's decision reads and writes; None when it may read anything."""
    batch = prepared.batch
    return None if batch.reads_everything else Footprint(batch.keys, batch.writes)
