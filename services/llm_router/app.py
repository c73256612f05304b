"""The LLM router service: the in-process router (libs.router) behind NATS, a work queue and an
OpenAI-compatible HTTP front. Wiring only: every routing decision is made by libs.core.routing through the
router; this module connects its interfaces, its audit trail, its metrics and its in-flight cap."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any

from libs.core.routing import LeaseBook, PolicyError, RoutingPolicy
from libs.db.engine import create_engine, create_session_factory
from libs.db.reachability import database_check
from libs.db.records import OutboxMessage
from libs.db.uow import unit_of_work_factory
from libs.events.catalogue import EventType, RpcSubject, WorkSubject
from libs.events.inference import (
    INFERENCE_FEEDBACK_SUBJECT,
    ROUTER_EXPERIMENTS_BUCKET,
    ROUTER_FLEET_STATUS_SUBJECT,
    ROUTER_LEDGER_BUCKET,
    ROUTER_SCOREBOARD_SUBJECT,
    ROUTER_STATUS_SUBJECT,
)
from libs.messaging.broker import Broker, bus_state, jetstream, make_broker, start_broker
from libs.messaging.readiness import connection_states
from libs.messaging.records import KvRecords
from libs.messaging.relay import OutboxRelay
from libs.messaging.streaming_rpc import RequestServer, serve_requests
from libs.messaging.work_queue import WorkQueueConsumer
from libs.providers import Provider, close_providers, open_providers, reopen_changed
from libs.router import (
    EventBuffer,
    PolicyFileWatcher,
    Router,
    RouterClock,
    RouterEvent,
    SystemClock,
    read_policy_file,
)
from libs.runtime.health import beat_forever, health_file, process_name
from libs.runtime.http_server import HttpServer
from libs.runtime.listener import inherited_listener, url_of
from libs.runtime.shutdown import bounded, cancel_tasks
from services.llm_router.audit import AuditFlusher, AuditSink
from services.llm_router.experiments import SharedExperiments
from services.llm_router.http_front import MetricsOnly, OpenAIFront
from services.llm_router.ledger import LeaseRefresher
from services.llm_router.metrics import RouterMetrics
from services.llm_router.nats_front import Feedback, RecentAnswers, Scoreboard, SyncInference
from services.llm_router.overload import EventLoopLag, InFlightCap, default_max_in_flight
from services.llm_router.peers import PeerOutcomes
from services.llm_router.settings import RouterSettings
from services.llm_router.status import RecentErrors, RouterStatus
from services.llm_router.work import AsyncInference

log = logging.getLogger(__name__)

SERVICE = "llm_router"
QUEUE_GROUP = "llm_router"
WORK_CONSUMER = "llm-router-inference"
# The router's own rows are handed to the relay at commit; polling only finds rows a crashed process left,
# which it may not take before the relay's 2 s hand-off grace anyway. Polling faster costs an idle router CPU.
RELAY_POLL_S = 1.0


class RouterService:
    """`await service.start()` ... `await service.stop()`. Nothing connects in the constructor.

    It serves its metrics on its HTTP server (`serves_metrics`), the process's included.

    `policy` and `providers` may be injected (tests, benchmarks); otherwise the policy is read from
    `settings.router_policy` and the providers are opened from it, and closed at stop.
    """

    serves_metrics = True

    def __init__(
        self,
        settings: RouterSettings,
        *,
        clock: RouterClock | None = None,
        policy: RoutingPolicy | None = None,
        providers: Mapping[str, Provider] | None = None,
    ) -> None:
        if not settings.nats_url:
            raise ValueError("the router service needs PODWAY_NATS_URL")
        if policy is None and settings.router_policy is None:
            raise ValueError("the router service needs PODWAY_ROUTER_POLICY (a policy file)")
        self.settings = settings
        self.clock: RouterClock = clock or SystemClock()
        self._policy = policy
        self._injected_providers = providers
        self.loop_lag = EventLoopLag()
        self.cap = InFlightCap(
            settings.router_max_in_flight or default_max_in_flight(),
            lag=lambda: self.loop_lag.lag_s,
            max_lag_s=settings.router_max_loop_lag_ms / 1000.0,
        )
        self.async_concurrency = settings.router_async_concurrency or max(1, self.cap.limit // 8)
        self.metrics = RouterMetrics()
        self.recent = RecentAnswers()
        self.recent_errors = RecentErrors()
        self.peers: PeerOutcomes | None = None
        # One holder name per process: a restarted process must not spend what its predecessor was granted.
        self.leases = (
            LeaseBook(f"{settings.instance}.{os.getpid()}") if settings.router_shared_budgets else None
        )
        self.ledger: LeaseRefresher | None = None
        self.experiments: SharedExperiments | None = None
        self.buffer = EventBuffer()
        self.sink = AuditSink(self.buffer, observe=self._observe)
        self.engine = create_engine(settings.resolved_database_url())
        self.uow = unit_of_work_factory(create_session_factory(self.engine), after_commit=self._kick_relay)
        self.flusher = AuditFlusher(
            self.buffer,
            self.uow,
            interval_s=settings.router_flush_interval_s,
            linger_s=settings.router_flush_linger_s,
            batch_events=settings.router_flush_batch,
            on_flush=self.metrics.flushed,
        )
        self.broker = make_broker(settings.nats_url, f"{SERVICE}-{settings.instance}")
        self.relay: OutboxRelay | None = None
        self.router: Router | None = None
        self.providers: Mapping[str, Provider] = {}
        # Clients a reload replaced: closed once every request begun before it has ended (or at stop).
        self._retired: list[Provider] = []
        self.watcher: PolicyFileWatcher | None = None
        self.work: WorkQueueConsumer | None = None
        self.http_url: str | None = None
        self.metrics_url: str | None = None
        self._servers: list[RequestServer] = []
        self._http_servers: list[HttpServer] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._flusher_task: asyncio.Task[None] | None = None

    def _kick_relay(self, committed: Sequence[OutboxMessage]) -> None:
        if self.relay is not None:
            self.relay.kick(committed)

    def _audit_dropped(self) -> dict[str, int]:
        return {"buffer_full": self.buffer.dropped, "backlog_full": self.flusher.dropped}

    def _observe(self, event: RouterEvent) -> None:
        self.metrics.observe(event)
        self.recent.observe(event)
        self.recent_errors.observe(event)

    async def _answered(self, request_id: str) -> tuple[str, str] | None:
        """Who answered `request_id`, from its `inference.completed` in the audit log; asked twice, the second
        time after the audit's flush interval and linger, since the process that answered may not have written it yet."""
        for attempt in range(2):
            async with self.uow() as uow:
                story = await uow.events.by_correlation(request_id)
            for event in reversed(story):
                if event.envelope.type == EventType.INFERENCE_COMPLETED:
                    return str(event.envelope.payload["feature"]), str(event.envelope.payload["model"])
            if attempt == 0:
                settings = self.settings
                await asyncio.sleep(settings.router_flush_interval_s + settings.router_flush_linger_s)
        return None

    # Lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        policy = self._policy or read_policy_file(self._policy_path())
        if self._injected_providers is not None:
            self.providers = self._injected_providers
        else:
            self.providers = await open_providers(policy.providers)
        router = self.router = Router(
            policy, self.providers, clock=self.clock, event_sink=self.sink, leases=self.leases
        )
        self.metrics.watch(
            router.breakers, lambda: self.cap.in_flight, lambda: len(self.buffer), self._audit_dropped
        )
        if self.settings.router_policy is not None:
            self.watcher = PolicyFileWatcher(router, self.settings.router_policy, on_error=_log_policy_error)

        await start_broker(self.broker)
        self.peers = PeerOutcomes(router, self.settings.instance)
        await self.peers.start(self.broker)
        self.experiments = await _shared_experiments(router, self.broker, self.settings.instance)
        if self.leases is not None:
            records = KvRecords(jetstream(self.broker), ROUTER_LEDGER_BUCKET)
            await records.open()
            self.ledger = LeaseRefresher(self.leases, records, self.clock)
            await self.ledger.refresh()  # the first grants, before any request is taken
            router.await_grant = self.ledger.grant_now
        self.relay = OutboxRelay(self.uow, jetstream(self.broker), poll_interval_s=RELAY_POLL_S)
        self._flusher_task = asyncio.create_task(self.flusher.run(), name="audit-flusher")
        self._tasks = [
            asyncio.create_task(self.relay.run(), name="outbox-relay"),
            asyncio.create_task(self.peers.run(), name="breaker-outcomes"),
        ]
        if self.ledger is not None:
            self._tasks.append(asyncio.create_task(self.ledger.run(), name="budget-leases"))
        if self.experiments is not None:
            self._tasks.append(asyncio.create_task(self.experiments.run(), name="experiments"))
        if self.cap.sheds_on_lag:  # the sampler wakes 50 times a second: only when something reads it
            self._tasks.append(asyncio.create_task(self.loop_lag.run(), name="loop-lag"))
        if self.watcher is not None:
            self._tasks.append(asyncio.create_task(self._watch_policy(), name="policy-watcher"))

        feedback = Feedback(router, self.recent, self.sink, self.clock, self._answered)
        status = RouterStatus(
            router,
            self.recent_errors,
            self.settings.instance,
            self.clock,
            self.ledger.ledgers if self.ledger is not None else None,
            self.leases.process if self.leases is not None else "",
        )
        self._servers = [
            await serve_requests(
                self.broker,
                RpcSubject.ROUTER_INFER,
                SyncInference(router, self.cap, self.metrics),
                queue=QUEUE_GROUP,
            ),
            await serve_requests(self.broker, INFERENCE_FEEDBACK_SUBJECT, feedback, queue=QUEUE_GROUP),
            await serve_requests(
                self.broker,
                ROUTER_SCOREBOARD_SUBJECT,
                Scoreboard(router, self.settings.instance),
                queue=QUEUE_GROUP,
            ),
            await serve_requests(self.broker, ROUTER_STATUS_SUBJECT, status, queue=QUEUE_GROUP),
            await serve_requests(self.broker, ROUTER_FLEET_STATUS_SUBJECT, status, queue=""),
        ]
        self.work = WorkQueueConsumer(
            name=WORK_CONSUMER,
            subject=WorkSubject.INFERENCE,
            handler=AsyncInference(router, self.sink, self.cap, self.clock),
            uow_factory=self.uow,
            concurrency=self.async_concurrency,
        )
        await self.work.start(self.broker)
        await self._serve_http(router)
        if self.settings.data_dir:
            run_dir = Path(self.settings.run_dir)
            self._write_run_file(run_dir)
            self._tasks.append(
                asyncio.create_task(
                    beat_forever(
                        health_file(run_dir, process_name(SERVICE, self.settings.instance)),
                        alive=lambda: bus_state(self.broker) != "closed",
                        connections=connection_states(self.broker, database_check(self.engine)),
                    ),
                    name="health",
                )
            )
        log.info(
            "router ready",
            extra={
                "nats": self.settings.nats_url,
                "http": self.http_url,
                "metrics": self.metrics_url,
                "max_in_flight": self.cap.limit,
                "max_loop_lag_ms": self.settings.router_max_loop_lag_ms,
                "async_concurrency": self.async_concurrency,
            },
        )

    async def stop(self) -> None:
        """Stop cleanly, and in bounded time: a step that hangs (a dead endpoint, a stuck drain) is logged and
        left behind rather than holding the process."""
        # 1. Stop taking requests; let those in progress finish. 2. Write what they left in the buffer.
        for server in self._servers:
            await _bounded(server.close(), "closing the NATS front")
        for http_server in self._http_servers:
            await _bounded(http_server.close(), "closing the HTTP front")
        if self.work is not None:
            await _bounded(self.work.stop(), "stopping the work queue")
        if self.peers is not None:
            await _bounded(self.peers.stop(), "leaving the breaker outcomes")
        await cancel_tasks(self._tasks, service=SERVICE)
        if self.experiments is not None:
            await _bounded(self.experiments.sync(), "storing the experiments' tallies")
        if self.ledger is not None:
            await _bounded(self.ledger.release_all(), "returning the budget leases")
        if self._flusher_task is not None:
            self.flusher.close()
            await _bounded(self._flusher_task, "flushing the audit buffer")
        if self.relay is not None:
            await _bounded(self.relay.publish_pending(), "publishing the outbox")
        await _bounded(self.broker.stop(), "stopping the broker")
        if self.router is not None:
            await _bounded(self.router.aclose(), "closing the router")
        if self._injected_providers is None:
            await _bounded(close_providers(self.providers), "closing the providers")
            await _bounded(_close_each(self._retired), "closing the providers a reload replaced")
        await _bounded(self.engine.dispose(), "closing the database pool")

    # Operations tests drive directly (no sleeping) ---------------------------------------------------------

    async def flush_audit(self) -> int:
        """Group-commit what is buffered now."""
        return await self.flusher.flush()

    async def check_policy(self) -> bool:
        """Reload the policy file if it changed; True when a new policy is in force. A provider the edit
        changed (its endpoint, region, project) or added gets a new client, so its traffic goes where the file
        says at once; requests in flight finish on the old client, closed once the longest deadline of the
        policy they began under has passed."""
        if self.watcher is None or self.router is None:
            return False
        router = self.router
        policy = self.watcher.changed_policy()
        if policy is None:
            return False
        previous = router.policy
        providers = self.providers
        if self._injected_providers is None:  # injected providers are the caller's: the router warns instead
            try:
                providers = await reopen_changed(self.providers, previous.providers, policy.providers)
            except Exception:
                log.exception("policy file not reloaded: a provider client could not be opened")
                return False
        opened = [p for name, p in providers.items() if p is not self.providers.get(name)]
        try:
            router.reload(policy, providers)
        except ValueError as exc:  # e.g. an injected set of providers without one the policy names
            log.error("policy file not reloaded: %s", exc)
            for provider in opened:
                await provider.aclose()
            return False
        retired = [p for name, p in self.providers.items() if p is not providers.get(name)]
        self.providers = providers
        if retired:
            self._retired.extend(retired)
            longest_s = max(f.deadline_ms for f in previous.features.values()) / 1000.0
            self._tasks = [task for task in self._tasks if not task.done()]
            self._tasks.append(
                asyncio.create_task(self._close_retired(retired, longest_s + 1.0), name="retired-providers")
            )
        return True

    # Internals ---------------------------------------------------------------------------------------------

    def _policy_path(self) -> Path:
        assert self.settings.router_policy is not None
        return self.settings.router_policy

    async def _close_retired(self, providers: list[Provider], after_s: float) -> None:
        await asyncio.sleep(after_s)
        for provider in providers:
            await provider.aclose()
            self._retired.remove(provider)

    async def _watch_policy(self) -> None:
        while True:
            await asyncio.sleep(self.settings.router_policy_poll_s)
            try:
                await self.check_policy()
            except Exception:  # a reload must never stop the watching for good
                log.exception("policy file check failed; the policy in force stays, still watching")

    async def _serve_http(self, router: Router) -> None:
        handler = OpenAIFront(router, self.cap, self.metrics)
        settings = self.settings
        front = HttpServer(
            handler,
            header_timeout_s=settings.router_header_timeout_s,
            body_timeout_s=settings.router_body_timeout_s,
            max_connections=settings.router_max_connections,
            max_pipelined=settings.router_max_pipelined,
            check_head=handler.check_head,
        )
        self.metrics.watch_http(front)
        if self.settings.router_http_fd is not None:
            listener = inherited_listener(self.settings.router_http_fd)
            await self._started(front).start(sock=listener)
            self.http_url = url_of(listener)
        elif self.settings.router_http_port >= 0:
            host = self.settings.router_http_host
            port = self.settings.router_http_port
            # SO_REUSEPORT lets replicas started by hand share a port (podway up shares one socket instead).
            _, bound = await self._started(front).start(host=host, port=port, reuse_port=port != 0)
            self.http_url = f"http://{host}:{bound}"
        if self.settings.metrics_port >= 0:
            metrics = self._started(HttpServer(MetricsOnly(self.metrics)))
            _, bound = await metrics.start(
                host=self.settings.router_http_host, port=self.settings.metrics_port
            )
            self.metrics_url = f"http://{self.settings.router_http_host}:{bound}/metrics"

    def _started(self, server: HttpServer) -> HttpServer:
        self._http_servers.append(server)
        return server

    def _write_run_file(self, run_dir: Path) -> None:
        """Where this replica's HTTP front and metrics listen, for the CLI and the demo."""
        run_dir.mkdir(parents=True, exist_ok=True)
        info: dict[str, Any] = {"http_url": self.http_url, "metrics_url": self.metrics_url}
        path = run_dir / f"{SERVICE}-{self.settings.instance}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(path)


def _log_policy_error(error: PolicyError) -> None:
    log.error("policy file has errors; keeping the policy in force:\n%s", error)


async def _close_each(providers: list[Provider]) -> None:
    for provider in providers:
        await provider.aclose()


async def _bounded(step: Awaitable[Any], what: str) -> None:
    await bounded(step, what, service=SERVICE)


async def _shared_experiments(router: Router, broker: Broker, instance: str) -> SharedExperiments | None:
    """The fleet's experiments, their records read once before the first request; None (each process tests
    on its own feedback) when the bus has no experiments bucket: streams provisioned by an older Podway."""
    records = KvRecords(jetstream(broker), ROUTER_EXPERIMENTS_BUCKET)
    try:
        await records.open()
    except Exception as exc:
        log.warning("experiments are not shared across router processes: %r (run `podway migrate`)", exc)
        return None
    experiments = SharedExperiments(router, records, instance)
    try:
        await experiments.sync()
    except Exception as exc:
        log.warning("experiment records not read at start: %r; the next pass tries again", exc)
    return experiments
