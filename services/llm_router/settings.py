"""The router service's settings: the common ones plus its fronts, its in-flight cap and its audit cadence."""

from __future__ import annotations

import sys
from typing import Literal

from pydantic import Field

from libs.runtime.settings import PodwaySettings


class RouterSettings(PodwaySettings):
    """`PODWAY_ROUTER_*` environment variables; `router_policy` and `metrics_port` come from PodwaySettings."""

    router_http_fd: int | None = Field(
        default=None,
        description="A listening socket inherited from the supervisor (`podway up`) for the OpenAI-compatible "
        "front; when set, router_http_host and router_http_port are not used",
    )
    router_http_host: str = Field(default="127.0.0.1", description="Address of the OpenAI-compatible front")
    router_http_port: int = Field(
        default=0, description="Port of the OpenAI-compatible front; 0 picks a free one, -1 disables it"
    )
    router_max_in_flight: int | None = Field(
        default=None, gt=0, description="Requests in flight per process; default sized for the machine"
    )
    # Off unless a deployment turns it on: on a shared host (CI, a laptop running the demo) neighbours make the
    # loop late without the router being overloaded, and refusing then would fail requests for nothing.
    router_max_loop_lag_ms: float = Field(
        default=0.0,
        ge=0,
        description="Refuse sync requests while the event loop runs this late; 0 disables",
    )
    router_async_concurrency: int | None = Field(
        default=None, gt=0, description="Work-queue items handled at once; default an eighth of the cap"
    )
    router_max_connections: int = Field(
        default=1000,
        gt=0,
        description="Client connections one router process holds; one more is refused (503)",
    )
    router_max_pipelined: int = Field(
        default=16, gt=0, description="Requests one connection may have waiting; beyond, reading pauses"
    )
    router_header_timeout_s: float = Field(
        default=10.0, gt=0, description="A request's head must arrive within this after its first byte (408)"
    )
    router_body_timeout_s: float = Field(
        default=30.0, gt=0, description="A request's body must arrive within this after its head (408)"
    )
    router_flush_interval_s: float = Field(
        default=0.05, gt=0, description="Audit group commits are at least this far apart"
    )
    router_flush_linger_s: float = Field(
        default=0.05, gt=0, description="An audit event waits at most this long for its group commit"
    )
    router_flush_batch: int = Field(
        default=64, gt=0, description="Audit events that make a group commit due without lingering"
    )
    router_event_loop: Literal["asyncio", "uvloop"] = Field(
        default="uvloop" if sys.platform != "win32" else "asyncio",
        description="The event loop the router runs on: uvloop proxies a request on less CPU than asyncio's",
    )
    router_shared_budgets: bool = Field(
        default=True,
        description="Lease feature and API-key budgets and PT capacity from the fleet's ledger on the bus, so "
        "every router process and replica shares them; off, each process keeps its own",
    )
    router_policy_poll_s: float = Field(default=1.0, gt=0, description="How often the policy file is checked")
