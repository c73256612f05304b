"""The two teams, running (tests/integration/quota/teams.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.quota.teams import Teams, running_teams


@pytest.fixture
async def teams(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Teams]:
    async with running_teams(nats_url, database_url, tmp_path) as running:
        yield running
