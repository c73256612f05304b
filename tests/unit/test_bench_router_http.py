"""router-http measures the raw call and the front in alternating windows, so that both meet the same host."""

from __future__ import annotations

import time

import pytest
from aiohttp import ClientSession, web

from bench import router_http
from bench.router_http import Call, Front, Run, interleaved


class CountingFront(Front):
    def __init__(self) -> None:
        super().__init__("http://unused", 1)
        self.reads = 0

    def cpu_seconds(self) -> float:
        self.reads += 1
        return self.reads * 0.5


async def test_raw_and_front_windows_alternate_and_each_run_gathers_its_own_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        order.append(request.path)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/raw", answer)
    app.router.add_post("/front", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    monkeypatch.setattr(router_http, "WINDOW_S", 0.05)
    monkeypatch.setattr(router_http, "emulators_cpu_seconds", time.perf_counter)
    try:
        async with ClientSession() as http:
            raw, through, emulator_cpu, router_cpu = await interleaved(
                http,
                Call(f"http://127.0.0.1:{port}/raw", b"{}", {}),
                Call(f"http://127.0.0.1:{port}/front", b"{}", {}),
                rate=200.0,
                seconds=0.2,
                front=CountingFront(),
            )
    finally:
        await runner.cleanup()

    assert len(raw.latencies_ms) == len(through.latencies_ms) == 40
    assert raw.errors == through.errors == 0
    windows = [path for n, path in enumerate(order) if n == 0 or order[n - 1] != path]
    assert windows == ["/raw", "/front"] * 4, "four windows of each, raw first, taking turns"
    assert router_cpu == 4 * 0.5, "the router's CPU is read around each front window only"
    assert emulator_cpu > 0


def test_a_run_takes_in_another_windows_latencies_errors_and_time() -> None:
    run = Run([1.0], errors=1, elapsed_s=1.0)
    run.add(Run([2.0, 3.0], errors=2, elapsed_s=0.5))
    assert run.latencies_ms == [1.0, 2.0, 3.0]
    assert (run.errors, run.elapsed_s) == (3, 1.5)


def test_the_fleets_overshoot_is_what_it_answered_beyond_one_full_bucket_over_the_window() -> None:
    within = router_http.fleet_figures(
        router_http.FleetRun(answered=10, tokens=14_000, first_sent=100.0, last_answered=130.0), 10_000
    )
    assert within["one_bucket_ideal_tokens"] == 15_000  # a full minute's bucket, and half a minute's refill
    assert within["overshoot_fraction_of_minute"] == 0.0
    over = router_http.fleet_figures(
        router_http.FleetRun(answered=10, tokens=15_600, first_sent=100.0, last_answered=130.0), 10_000
    )
    assert over["overshoot_fraction_of_minute"] == pytest.approx(0.06)
    assert over["spent_fraction_of_ideal"] == pytest.approx(1.04)
