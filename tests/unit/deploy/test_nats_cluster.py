"""The Kubernetes NATS config (deploy/k8s/base/nats) run by three real nats-servers on this machine: the routes
authenticate with the nats-routes Secret's credentials over mutual TLS with the nats-route-tls Secret's files,
JetStream forms its cluster (streams of three replicas are created), and a server with the wrong route
password is refused. Only the addresses change: ports are free ones on 127.0.0.1, files are in a temporary
directory laid out as the pod mounts them (config/, routes/, route-tls/)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from libs.events.catalogue import EVENTS_STREAM
from libs.messaging.permissions import USERS
from libs.messaging.streams import ensure_streams, stream_configs
from libs.runtime.nats_server import EmbeddedNatsServer, free_port

ROOT = Path(__file__).resolve().parents[3]
NATS = ROOT / "deploy" / "k8s" / "base" / "nats"
PASSWORDS = {u.password_variable: f"{u.name}-test" for u in USERS} | {"NATS_SYS_PASSWORD": "sys-test"}
ROUTE_USER, ROUTE_PASSWORD = "route", "route-test-secret"


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def route_tls(directory: Path) -> None:
    """A CA and one certificate for every server (127.0.0.1), for server and client use: the nats-route-tls
    Secret's tls.crt, tls.key and ca.crt."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "podway-nats-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nats")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True)
    (directory / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(_pem(key))


def routes_conf(route_ports: list[int], password: str = ROUTE_PASSWORD) -> str:
    """The nats-routes Secret's routes.conf: who may connect as a route, and the routes with credentials."""
    routes = "\n".join(f"  nats-route://{ROUTE_USER}:{password}@127.0.0.1:{p}" for p in route_ports)
    return f'authorization {{ user: {ROUTE_USER}, password: "{password}" }}\nroutes: [\n{routes}\n]\n'


def pod_files(root: Path, name: str, route_port: int, routes: str, tls: Path) -> Path:
    """One server's files, laid out as the pod mounts them; returns the config file."""
    config = root / name / "config"
    config.mkdir(parents=True)
    server = (NATS / "nats-server.conf").read_text()
    server = server.replace("store_dir: /data/jetstream", f"store_dir: {root / name / 'jetstream'}")
    server = server.replace("pid_file: /var/run/nats/nats.pid", f"pid_file: {root / name / 'nats.pid'}")
    (config / "nats-server.conf").write_text(server)
    cluster = (NATS / "cluster.conf").read_text()
    assert "port: 6222" in cluster
    assert "/etc/nats/route-tls/" in cluster
    cluster = cluster.replace("port: 6222", f"port: {route_port}").replace("/etc/nats/route-tls/", f"{tls}/")
    (config / "cluster.conf").write_text(cluster)
    (root / name / "routes").mkdir()
    (root / name / "routes" / "routes.conf").write_text(routes)
    return config / "nats-server.conf"


def monitor(server: EmbeddedNatsServer, path: str) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.monitor_port}{path}", timeout=5) as answer:
        found: dict[str, object] = json.loads(answer.read())
        return found


def peers(server: EmbeddedNatsServer) -> set[str]:
    """The servers this one has routes to (NATS pools several connections per peer)."""
    routes = monitor(server, "/routez").get("routes") or []
    return {route["remote_name"] for route in routes}  # type: ignore[union-attr]


def routed(servers: list[EmbeddedNatsServer]) -> bool:
    return all(len(peers(s)) == len(servers) - 1 for s in servers)


def wait_for(condition, what: str, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        time.sleep(0.1)


def start(root: Path, name: str, config: Path) -> EmbeddedNatsServer:
    env = {
        **PASSWORDS,
        "POD_NAME": name,
        "NATS_MAX_FILE_STORE": "1GB",
        "NATS_MAX_MEMORY_STORE": "64MB",
    }
    return EmbeddedNatsServer(data_dir=root / name / "run", config_file=config, env=env).start()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[EmbeddedNatsServer], Path, list[int]]]:
    tls = tmp_path / "route-tls"
    route_tls(tls)
    ports = [free_port() for _ in range(3)]
    servers: list[EmbeddedNatsServer] = []
    try:
        for index, port in enumerate(ports):
            config = pod_files(tmp_path, f"nats-{index}", port, routes_conf(ports), tls)
            servers.append(start(tmp_path, f"nats-{index}", config))
        yield servers, tls, ports
    finally:
        for server in servers:
            server.stop()


def test_the_three_servers_route_to_each_other_over_mutual_tls_and_form_a_jetstream_cluster(
    cluster, monkeypatch
):
    servers, _, _ = cluster
    wait_for(lambda: routed(servers), "every server routed to the two others")
    for server in servers:
        info = monitor(server, "/varz")["cluster"]
        assert info["name"] == "podway"  # type: ignore[index]
        assert info["tls_required"] is True  # type: ignore[index]
        assert info["tls_verify"] is True  # type: ignore[index]
    names = {monitor(s, "/varz")["server_name"] for s in servers}
    assert names == {"nats-0", "nats-1", "nats-2"}

    async def streams_of_three() -> int:
        url = servers[0].url.replace("nats://", f"nats://migrate:{PASSWORDS['NATS_MIGRATE_PASSWORD']}@")
        client = await nats.connect(url, inbox_prefix="_INBOX.migrate")
        try:
            js = client.jetstream()
            deadline = time.monotonic() + 30
            while True:  # the meta leader is elected once the routes are up
                try:
                    await ensure_streams(js, stream_configs(replicas=3))
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            info = await js.stream_info(EVENTS_STREAM)
            return len(info.cluster.replicas or []) + 1  # type: ignore[union-attr]
        finally:
            await client.close()

    for variable in ("PODWAY_EVENTS_MAX_BYTES", "PODWAY_WORK_MAX_BYTES", "PODWAY_DLQ_MAX_BYTES"):
        monkeypatch.setenv(variable, str(64 * 1024 * 1024))
    assert asyncio.run(streams_of_three()) == 3


def test_a_server_with_the_wrong_route_password_is_not_let_in(cluster, tmp_path: Path):
    servers, tls, ports = cluster
    wait_for(lambda: routed(servers), "every server routed to the two others")
    intruder_port = free_port()
    config = pod_files(
        tmp_path, "intruder", intruder_port, routes_conf([*ports, intruder_port], password="guessed"), tls
    )
    intruder = start(tmp_path, "intruder", config)
    try:
        log = tmp_path / "intruder" / "run" / "nats-server.log"
        wait_for(lambda: "Route Error 'Authorization Violation'" in log.read_text(), "the intruder refused")
        # A route may be up for the moment its credentials are checked: the intruder ends up alone.
        wait_for(lambda: peers(intruder) == set(), "the intruder without a route")
        assert [peers(s) for s in servers] == [
            {"nats-1", "nats-2"},
            {"nats-0", "nats-2"},
            {"nats-0", "nats-1"},
        ]
    finally:
        intruder.stop()
