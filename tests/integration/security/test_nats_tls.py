"""The bus over TLS: a nats-server that demands TLS and verifies client certificates (a CA, server and client
certificates made by the test), the services and the CLI connecting through PODWAY_NATS_TLS_CA / _CERT / _KEY,
and the connections that must not get in refused."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from libs.client.client import PodwayClient
from libs.messaging.broker import TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV, provision_streams
from libs.messaging.rpc import RpcUnavailable
from libs.runtime.nats_server import EmbeddedNatsServer
from libs.runtime.settings import PodwaySettings
from services.admission.app import AdmissionService
from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from services.scheduler.app import SchedulerService
from tests.conftest import SQLITE_ONLY, FakeClock
from tests.integration.nats_permissions.test_services_on_their_users import four_nodes
from tests.integration.scheduler.conftest import example
from tests.integration.scheduler.manifests import NAMESPACE, gang
from tests.support import eventually


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_ca: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca_key, stranger_key = _key(), _key()
    _write(tmp_path / "ca.pem", _certificate("podway-test-ca", ca_key, "podway-test-ca", ca_key, ca=True))
    _write(
        tmp_path / "stranger.pem", _certificate("stranger", stranger_key, "stranger", stranger_key, ca=True)
    )
    for role in ("server", "client"):
        key = _key()
        _write(tmp_path / f"{role}.pem", _certificate(role, key, "podway-test-ca", ca_key, ca=False), key)
    return Pki(
        ca=tmp_path / "ca.pem",
        server_cert=tmp_path / "server.pem",
        server_key=tmp_path / "server.key",
        client_cert=tmp_path / "client.pem",
        client_key=tmp_path / "client.key",
        stranger_ca=tmp_path / "stranger.pem",
    )


@pytest.fixture
def tls_nats(tmp_path: Path, pki: Pki) -> Iterator[EmbeddedNatsServer]:
    """nats-server with JetStream that accepts TLS only, from clients holding a certificate of the CA."""
    config = tmp_path / "nats-tls.conf"
    config.write_text(
        f"""
jetstream {{ store_dir: "{tmp_path / "jetstream"}" }}
tls {{
  cert_file: "{pki.server_cert}"
  key_file: "{pki.server_key}"
  ca_file: "{pki.ca}"
  verify: true
  timeout: 2
}}
"""
    )
    server = EmbeddedNatsServer(data_dir=tmp_path / "nats", config_file=config).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tls_env(monkeypatch: pytest.MonkeyPatch, pki: Pki) -> None:
    monkeypatch.setenv(TLS_CA_ENV, str(pki.ca))
    monkeypatch.setenv(TLS_CERT_ENV, str(pki.client_cert))
    monkeypatch.setenv(TLS_KEY_ENV, str(pki.client_key))


@SQLITE_ONLY  # what is checked is the bus, not the database
async def test_services_and_the_cli_run_a_gang_over_tls(
    tls_nats: EmbeddedNatsServer, tls_env: None, database_url: str, tmp_path: Path
) -> None:
    await provision_streams(tls_nats.url)
    fields = {"nats_url": tls_nats.url, "database_url": database_url, "lease_seconds": 5}
    admission = AdmissionService(PodwaySettings(**fields, data_dir=tmp_path / "admission"))
    scheduler = SchedulerService(PodwaySettings(**fields, data_dir=tmp_path / "scheduler"))
    agent = NodeAgentService(
        NodeAgentSettings(**fields, data_dir=tmp_path / "agent"), clock=FakeClock(), manifests=four_nodes()
    )
    await admission.start()
    try:
        async with PodwayClient(tls_nats.url, timeout_s=30) as client:
            await client.apply(example("01-priorityclasses.yaml") + example("02-dra.yaml"))
            await agent.start()
            await scheduler.start()
            await client.apply(gang("over-tls", 2, gpus=1))
            pods = await eventually(
                lambda: client.get("Pod", namespace=NAMESPACE),
                lambda pods: (
                    len(pods) == 2 and all(p.get("status", {}).get("phase") == "Running" for p in pods)
                ),
                timeout_s=30,
            )
            assert {p["status"]["phase"] for p in pods} == {"Running"}
    finally:
        await scheduler.stop()
        await agent.stop()
        await admission.stop()


async def _connects(url: str) -> bool:
    """Whether a client gets in; one that cannot is told so (the bound is how long it keeps retrying)."""
    try:
        async with PodwayClient(url, timeout_s=2, connect_timeout_s=1) as client:
            await client.get("Pod", namespace=NAMESPACE)
    except RpcUnavailable as exc:
        refusal = str(exc)
    else:
        return True
    assert "cannot reach NATS" in refusal
    return False


async def test_a_client_without_tls_is_refused(tls_nats: EmbeddedNatsServer) -> None:
    assert not await _connects(tls_nats.url)


async def test_a_client_without_a_certificate_is_refused(
    tls_nats: EmbeddedNatsServer, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TLS_CA_ENV, str(pki.ca))
    assert not await _connects(tls_nats.url)


async def test_a_server_the_ca_did_not_sign_is_refused(
    tls_nats: EmbeddedNatsServer, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TLS_CA_ENV, str(pki.stranger_ca))
    monkeypatch.setenv(TLS_CERT_ENV, str(pki.client_cert))
    monkeypatch.setenv(TLS_KEY_ENV, str(pki.client_key))
    assert not await _connects(tls_nats.url)
