"""TLS to nats-server from the environment, standard library only (the CLI's blocking client uses it too)."""

from __future__ import annotations

import os
import ssl

__all__ = ["TLS_CA_ENV", "TLS_CERT_ENV", "TLS_KEY_ENV", "tls_context"]

TLS_CA_ENV = "PODWAY_NATS_TLS_CA"
"""PEM file of the CA that signed nats-server's certificate; set, every connection verifies the server."""
TLS_CERT_ENV = "PODWAY_NATS_TLS_CERT"
"""PEM client certificate (with TLS_KEY_ENV) for servers that verify clients (`tls { verify: true }`)."""
TLS_KEY_ENV = "PODWAY_NATS_TLS_KEY"


def tls_context(environ: dict[str, str] | None = None) -> ssl.SSLContext | None:
    """The TLS context the environment asks for: None when no CA is named (a `tls://` URL then uses the
    system's trust store), else one that verifies the server against the CA and presents the client
    certificate when one is named."""
    env = os.environ if environ is None else environ
    ca = env.get(TLS_CA_ENV)
    if not ca:
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    cert, key = env.get(TLS_CERT_ENV), env.get(TLS_KEY_ENV)
    if cert:
        context.load_cert_chain(cert, key or None)
    return context
