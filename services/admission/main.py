"""`podway-admission`: run the admission service until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import signal

from libs.runtime.logging import configure_logging
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService


async def serve(settings: PodwaySettings) -> None:
    service = AdmissionService(settings)
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
    configure_logging("admission", settings.log_level, settings.log_format)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
