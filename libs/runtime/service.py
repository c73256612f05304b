"""The one way every service process runs: configure logs, start, wait for SIGINT/SIGTERM, stop cleanly."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Protocol, TypeVar

from libs.runtime.logging import configure_logging
from libs.runtime.memory import freeze_long_lived, tune_collector
from libs.runtime.settings import PodwaySettings


class Service(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


S = TypeVar("S", bound=PodwaySettings)


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


def run_service(name: str, settings: S, make: Callable[[S], Service]) -> None:
    """A service's `main()`: logs as `name`, then serve until signalled."""
    configure_logging(name, settings.log_level, settings.log_format)
    tune_collector()
    asyncio.run(serve_until_signalled(make(settings)))
