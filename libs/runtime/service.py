"""The one way every service process runs: configure logs, start, wait for SIGINT/SIGTERM, stop cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any, Literal, Protocol, TypeVar

from libs.runtime.health import BEAT_DETAIL
from libs.runtime.logging import configure_logging
from libs.runtime.memory import freeze_long_lived, tune_collector
from libs.runtime.metrics import serve_metrics
from libs.runtime.settings import PodwaySettings
from libs.runtime.shutdown import let_go_of_stragglers
from libs.runtime.tracing import configure_tracing

log = logging.getLogger(__name__)


class Service(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


S = TypeVar("S", bound=PodwaySettings)
T = TypeVar("T")
EventLoop = Literal["asyncio", "uvloop"]


async def serve_until_signalled(service: Service) -> None:
    """Start `service`, run until SIGINT or SIGTERM, then stop it (also when start-up fails half-way)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await service.start()
        freeze_long_lived()
        await stop.wait()
    finally:
        await service.stop()
        await let_go_of_stragglers(service=type(service).__name__)


def run_service(
    name: str,
    settings: S,
    make: Callable[[S], Service],
    *,
    event_loop: EventLoop = "asyncio",
    short_pauses: bool = False,
) -> None:
    """A service's `main()`: logs as `name`, traces when an OTLP endpoint is set, serves its metrics, then
    serves until signalled on `event_loop`; `short_pauses` for a service every request waits on (see
    libs.runtime.memory)."""
    configure_logging(name, settings.log_level, settings.log_format)
    tracing = configure_tracing(name, endpoint=settings.otlp_endpoint)
    tune_collector(short_pauses=short_pauses)
    service = make(settings)
    server = observe(name, settings, service)
    extra = {"metrics_port": BEAT_DETAIL.get("metrics_port"), "tracing": tracing, "event_loop": event_loop}
    log.info("%s starting", name, extra=extra)
    try:
        run_on(event_loop, serve_until_signalled(service))
    finally:
        if server is not None:
            server.shutdown()


def run_on(event_loop: EventLoop, main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a new loop of the kind asked for. uvloop (libuv, in C) spends about a tenth
    less CPU per proxied request than asyncio's selector loop on the router's front (`podway bench
    router-http`, alternating runs)."""
    if event_loop == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def observe(name: str, settings: PodwaySettings, service: Any) -> Any:
    """Serve the process's metrics (and the service's `metrics_registry`) on `settings.metrics_port`, unless
    disabled (-1) or the service serves them itself (`serves_metrics`: the scheduler and the router, which
    include the process's); the port goes into every health beat."""
    if settings.metrics_port < 0 or getattr(service, "serves_metrics", False):
        return None
    extra = getattr(service, "metrics_registry", None)
    server, port = serve_metrics(settings.metrics_port, settings.metrics_host, *([extra] if extra else []))
    BEAT_DETAIL["metrics_port"] = port
    return server
