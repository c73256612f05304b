"""`podway-api-server`: the Kubernetes REST API (kubectl, the kubernetes client) until SIGINT/SIGTERM."""

from __future__ import annotations

from libs.runtime.service import run_service
from services.api_server.app import ApiServerService
from services.api_server.settings import ApiServerSettings


def main() -> None:
    run_service("api_server", ApiServerSettings(), ApiServerService, short_pauses=True)


if __name__ == "__main__":
    main()
