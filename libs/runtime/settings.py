"""Settings for every process, from the environment (`PODWAY_` prefix) and the command line."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class PodwaySettings(BaseSettings):
    """How a Podway process reaches its stack. Unset URLs mean the embedded defaults in `data_dir`."""

    model_config = SettingsConfigDict(env_prefix="PODWAY_", extra="ignore")

    data_dir: Path = Field(default=Path(".podway"), description="Embedded NATS, SQLite and run files")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite in data_dir")
    nats_url: str | None = Field(default=None, description="NATS URL; default an embedded nats-server")
    log_level: str = Field(default="INFO")
    log_format: str = Field(default="json", description="json or text")
    metrics_port: int = Field(default=0, description="Prometheus port; 0 picks a free one, -1 disables")
    lease_seconds: float = Field(default=10.0, description="Leader lease length of leased services")
    claims_timeout_seconds: float = Field(
        default=30.0, description="Scheduler: how long a placement waits for its claims before it is released"
    )
    time_compression: float = Field(default=1.0, description="Node agent: simulated seconds per second")
    router_policy: Path | None = Field(default=None, description="Router policy YAML")
    instance: str = Field(default="0", description="Replica name within a service")

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'podway.db').resolve()}"

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"
