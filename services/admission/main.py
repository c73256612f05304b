"""`podway-admission`: run the admission service until SIGINT/SIGTERM."""

from __future__ import annotations

from libs.runtime.service import run_service
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService


def main() -> None:
    run_service("admission", PodwaySettings(), AdmissionService, short_pauses=True)


if __name__ == "__main__":
    main()
