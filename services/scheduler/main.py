"""`podway-scheduler`: run the scheduler until SIGINT/SIGTERM (active while it holds the lease)."""

from __future__ import annotations

from libs.runtime.service import run_service
from libs.runtime.settings import PodwaySettings
from services.scheduler.app import SchedulerService


def main() -> None:
    run_service("scheduler", PodwaySettings(), SchedulerService)


if __name__ == "__main__":
    main()
