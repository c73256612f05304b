"""`podway-llm-router`: run the router service until SIGINT/SIGTERM."""

from __future__ import annotations

from libs.runtime.service import run_service
from services.llm_router.app import RouterService
from services.llm_router.settings import RouterSettings


def main() -> None:
    settings = RouterSettings()
    run_service("llm_router", settings, RouterService, event_loop=settings.router_event_loop)


if __name__ == "__main__":
    main()
