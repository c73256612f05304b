"""Settings for every process, from the environment (`PODWAY_` prefix) and the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from libs.runtime.urls import redact_credentials, url_with_credentials

__all__ = ["PodwaySettings", "redact_credentials", "url_with_credentials"]


class PodwaySettings(BaseSettings):
    """How a Podway process reaches its stack. Unset URLs mean the embedded defaults in `data_dir`."""

    model_config = SettingsConfigDict(env_prefix="PODWAY_", extra="ignore")

    data_dir: Path = Field(default=Path(".podway"), description="Embedded NATS, SQLite and run files")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite in data_dir")
    nats_url: str | None = Field(
        default=None,
        description="NATS URL, or a comma-separated list of a cluster's servers (each tried, reconnected "
        "across), with `user:password@` to connect as a NATS user; default an embedded nats-server",
    )
    nats_user: str | None = Field(
        default=None, description="NATS user (with nats_password), put into nats_url"
    )
    nats_password: SecretStr | None = Field(default=None, description="Password of nats_user")
    log_level: str = Field(default="INFO")
    log_format: str = Field(default="json", description="json or text")
    metrics_port: int = Field(default=0, description="Prometheus port; 0 picks a free one, -1 disables")
    metrics_host: str = Field(default="127.0.0.1", description="Address the Prometheus endpoint listens on")
    otlp_endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP collector (e.g. http://otel-collector:4318); tracing is off without one "
        "(OTEL_EXPORTER_OTLP_ENDPOINT works too)",
    )
    lease_seconds: float = Field(default=10.0, description="Leader lease length of leased services")
    claims_timeout_seconds: float = Field(
        default=30.0, description="Scheduler: how long a placement waits for its claims before it is released"
    )
    fair_sharing: bool = Field(
        default=False,
        description="Scheduler and preemptor: Kueue's fairSharing.enable (heads of a cohort compete by "
        "dominant resource share; quota preemption follows the fair-sharing strategies)",
    )
    admission_fair_sharing_half_life_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Scheduler: Kueue's admissionFairSharing.usageHalfLifeTime; set, ClusterQueues with "
        "admissionScope.admissionMode UsageBasedAdmissionFairSharing admit first the workloads of the "
        "LocalQueue that used the least lately (unset: off)",
    )
    admission_fair_sharing_sampling_seconds: float = Field(
        default=300.0, gt=0, description="Scheduler: Kueue's admissionFairSharing.usageSamplingInterval"
    )
    admission_fair_sharing_resource_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Scheduler: Kueue's admissionFairSharing.resourceWeights, as JSON "
        '(e.g. {"nvidia.com/gpu": 100}); a resource not named weighs 1',
    )
    admission_kept_objects: int = Field(
        default=20_000,
        ge=0,
        description="Admission: objects whose decoded documents lists keep between reads (3-10 kB each), "
        "so that listing unchanged objects again reads only their versions; 0 keeps none",
    )
    time_compression: float = Field(default=1.0, description="Node agent: simulated seconds per second")
    node_heartbeat_seconds: float = Field(
        default=10.0,
        gt=0,
        description="Node agent: how often it beats for its nodes (the scheduler reads twice as often)",
    )
    node_monitor_grace_seconds: float = Field(
        default=40.0,
        gt=0,
        description="Scheduler: a node unheard this long is NotReady (nothing new goes there)",
    )
    node_eviction_seconds: float = Field(
        default=300.0,
        ge=0,
        description="Scheduler: a node NotReady this long is lost, and the pods on it fail",
    )
    retention_events_days: float = Field(
        default=30.0, gt=0, description="Retention: days the audit log keeps an event (`podway events`)"
    )
    retention_outbox_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Retention: seconds a published outbox row is kept (default and least: the JetStream "
        "duplicate window, twice and once)",
    )
    retention_inbox_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Retention: seconds a consumer's inbox mark is kept (default and least: the redelivery "
        "window, twice and once)",
    )
    retention_interval_seconds: float = Field(
        default=300.0,
        ge=0,
        description="Retention: how often admission prunes (one replica at a time); 0: only `podway gc` does",
    )
    router_policy: Path | None = Field(default=None, description="Router policy YAML")
    router_http_address: str = Field(
        default="127.0.0.1:8400",
        description="Where `podway up` serves the router's OpenAI-compatible front (HOST:PORT; port 0 picks one)",
    )
    router_processes: int = Field(
        default=0, ge=0, description="Router processes `podway up` runs on that address; 0 = one per CPU"
    )
    instance: str = Field(default="0", description="Replica name within a service")

    @model_validator(mode="after")
    def _nats_credentials_in_url(self) -> Self:
        """Every process hands `nats_url` to its brokers and clients, so credentials given as fields travel in
        it, percent-encoded."""
        if self.nats_user is None and self.nats_password is None:
            return self
        if self.nats_user is None or self.nats_password is None:
            raise ValueError("PODWAY_NATS_USER and PODWAY_NATS_PASSWORD go together")
        if self.nats_url:
            self.nats_url = url_with_credentials(
                self.nats_url, self.nats_user, self.nats_password.get_secret_value()
            )
        return self

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'podway.db').resolve()}"

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"
