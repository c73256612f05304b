"""The control endpoints every emulator serves: `POST /__emulator/<knob>` with a JSON body, counters, and the latest
request bodies received (`GET /__emulator/requests?model=...`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from libs.emulators.control import (
    CapacityKnob,
    EmulatorControl,
    ErrorKnob,
    LatencyKnob,
    MidStreamKnob,
    OutageKnob,
    OutputKnob,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CONTROL_KEY = web.AppKey("control", EmulatorControl)


def add_control_routes(app: web.Application, control: EmulatorControl) -> None:
    """Keep `control` on the app for the cloud handlers and mount its knobs under `/__emulator/`."""
    app[CONTROL_KEY] = control

    def knob(apply: Callable[[dict[str, Any]], None]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                apply(await request.json() if request.can_read_body else {})
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError and bad JSON are ValueErrors
                return web.json_response({"error": str(exc)}, status=400)
            return web.json_response({"ok": True})

        return handler

    routes: dict[str, Callable[[dict[str, Any]], None]] = {
        "capacity": lambda b: control.set_capacity(**CapacityKnob.model_validate(b).model_dump()),
        "latency": lambda b: control.set_latency(**LatencyKnob.model_validate(b).model_dump()),
        "errors": lambda b: control.inject_error(**ErrorKnob.model_validate(b).model_dump()),
        "outage": lambda b: control.start_outage(**OutageKnob.model_validate(b).model_dump()),
        "outage/clear": lambda b: control.end_outage(b.get("model")),
        "midstream": lambda b: control.fail_mid_stream(**MidStreamKnob.model_validate(b).model_dump()),
        "output": lambda b: control.set_output_tokens(OutputKnob.model_validate(b).tokens),
        "reset": lambda _: control.reset(),
    }
    for name, apply in routes.items():
        app.router.add_post(f"/__emulator/{name}", knob(apply))

    async def counters(_: web.Request) -> web.Response:
        return web.json_response(control.counters())

    app.router.add_get("/__emulator/counters", counters)

    async def requests(request: web.Request) -> web.Response:
        return web.json_response(control.requests(request.query.get("model")))

    app.router.add_get("/__emulator/requests", requests)
