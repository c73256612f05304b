"""The API server's settings (environment `PODWAY_API_*`, besides the stack's `PODWAY_*`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from libs.runtime.settings import PodwaySettings


class ApiServerSettings(PodwaySettings):
    """Where the Kubernetes REST API listens and whom it lets in."""

    api_host: str = Field(default="127.0.0.1", description="Address the API listens on")
    api_port: int | None = Field(
        default=None,
        description="Port; unset: the one this data directory used before, else 6443 when free, else any "
        "free port (the kubeconfig names it)",
    )
    api_tls: bool = Field(default=True, description="Serve HTTPS with a certificate from the stack's own CA")
    api_tokens_file: Path | None = Field(
        default=None,
        description='Bearer tokens (kube-apiserver\'s token CSV: token,user,uid,"groups"); unset: an admin and '
        "a viewer token generated in DATA_DIR/pki/tokens.csv",
    )
    api_listed_objects: int = Field(
        default=10_000,
        ge=0,
        description="Objects of each kind whose decoded form lists keep between reads, by admission's encoding "
        "of each (about 10 kB each for a small pod), so that listing unchanged objects again decodes none; the "
        "pods are decoded before the API listens, up to this many; 0 keeps none",
    )
