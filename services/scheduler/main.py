"""`podway-scheduler`: run the scheduler until SIGINT/SIGTERM (active while it holds the lease)."""

from __future__ import annotations

import asyncio
import signal

from libs.runtime.logging import configure_logging
from libs.runtime.settings import PodwaySettings
from services.scheduler.app import SchedulerService


async def serve(settings: PodwaySettings) -> None:
    service = SchedulerService(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await service.start()
    try:
        await stop.wait()
    finally:
        await service.stop()


def main() -> None:
    settings = PodwaySettings()
    configure_logging("scheduler", settings.log_level, settings.log_format)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
