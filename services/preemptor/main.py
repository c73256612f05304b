"""`podway-preemptor`: run the preemptor until SIGINT/SIGTERM (active while it holds the lease)."""

from __future__ import annotations

from libs.runtime.service import run_service
from libs.runtime.settings import PodwaySettings
from services.preemptor.app import PreemptorService


def main() -> None:
    run_service("preemptor", PodwaySettings(), PreemptorService)


if __name__ == "__main__":
    main()
