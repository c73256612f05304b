"""`podway-llm-router`: run the router service until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import signal

from libs.runtime.logging import configure_logging
from services.llm_router.app import RouterService
from services.llm_router.settings import RouterSettings


async def serve(settings: RouterSettings) -> None:
    service = RouterService(settings)
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
    settings = RouterSettings()
    configure_logging("llm_router", settings.log_level, settings.log_format)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
