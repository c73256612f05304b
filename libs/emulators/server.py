"""Running both emulators: in-process (`serve`, used by tests, benchmarks and `podway emulators up`) or as
`python -m libs.emulators`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from libs.emulators.bedrock import create_bedrock_app
from libs.emulators.control import EmulatorControl
from libs.emulators.vertex import create_vertex_app


@dataclass
class RunningEmulators:
    """Both emulators, listening; `bedrock`/`vertex` are their knobs (the same the control endpoints turn)."""

    bedrock_url: str
    vertex_url: str
    bedrock: EmulatorControl
    vertex: EmulatorControl
    _runners: tuple[web.AppRunner, ...]

    async def close(self) -> None:
        """Stop listening and drop open connections."""
        for runner in self._runners:
            await runner.cleanup()

    def reset(self) -> None:
        """Both emulators back to their defaults."""
        self.bedrock.reset()
        self.vertex.reset()


async def serve(
    bedrock_port: int = 0,
    vertex_port: int = 0,
    *,
    host: str = "127.0.0.1",
    clock: Callable[[], float] = time.monotonic,
    seed: int = 0,
) -> RunningEmulators:
    """Start the Bedrock and Vertex emulators on `host` (port 0 = a free port) in the running event loop."""
    bedrock = EmulatorControl(clock=clock, seed=seed)
    vertex = EmulatorControl(clock=clock, seed=seed + 1)
    bedrock_runner, bedrock_url = await _start(create_bedrock_app(bedrock), host, bedrock_port)
    vertex_runner, vertex_url = await _start(create_vertex_app(vertex), host, vertex_port)
    return RunningEmulators(bedrock_url, vertex_url, bedrock, vertex, (bedrock_runner, vertex_runner))


async def serve_forever(
    bedrock_port: int = 0,
    vertex_port: int = 0,
    *,
    host: str = "127.0.0.1",
    seed: int = 0,
    on_ready: Callable[[RunningEmulators], None] | None = None,
) -> None:
    """Serve both emulators until cancelled; `on_ready` is told the URLs once they listen."""
    emulators = await serve(bedrock_port, vertex_port, host=host, seed=seed)
    try:
        if on_ready is not None:
            on_ready(emulators)
        await asyncio.Event().wait()
    finally:
        await emulators.close()


async def _start(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    # Handlers stop when their client disconnects, as a real endpoint stops generating for a gone caller.
    runner = web.AppRunner(
        app, access_log=None, handle_signals=False, handler_cancellation=True, shutdown_timeout=1.0
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    bound_port = runner.addresses[0][1]
    return runner, f"http://{host}:{bound_port}"
