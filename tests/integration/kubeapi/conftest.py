"""Admission and the API server in-process on a real nats-server and database, as these tests start them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from libs.kubeapi.security import ADMIN
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.api_server.app import ApiServerService
from services.api_server.settings import ApiServerSettings


@asynccontextmanager
async def admission_and_api(
    nats_url: str, database_url: str, data_dir: Path, **api: Any
) -> AsyncIterator[tuple[AdmissionService, ApiServerService, str]]:
    """Admission, then the API server on plain HTTP (`api`: more of its settings), and the admin's token."""
    admission = AdmissionService(
        PodwaySettings(nats_url=nats_url, database_url=database_url, data_dir=data_dir)
    )
    await admission.start()
    server = ApiServerService(
        ApiServerSettings(
            nats_url=nats_url, database_url=database_url, data_dir=data_dir, api_port=0, api_tls=False, **api
        )
    )
    try:
        await server.start()
        assert server.tokens is not None
        token = server.tokens.token_of(ADMIN.name) or ""
        yield admission, server, token
    finally:
        await server.stop()
        await admission.stop()
