"""The endpoint's TLS and tokens, proven with the real clients: kubectl and the kubernetes Python client
verify the server against the generated CA and send the kubeconfig's bearer token."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from aiohttp import web
from cryptography import x509

from libs.kubeapi import security, status
from libs.kubeapi.security import Tokens, User, authorize

VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.0-podway",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_ca_and_server_certificate_are_made_once_and_reused(tmp_path):
    paths = security.ensure_ca_and_server_cert(tmp_path)
    assert mode(paths.ca_key) == 0o600
    assert mode(paths.server_key) == 0o600
    first = paths.server_cert.read_bytes(), paths.ca_cert.read_bytes()
    again = security.ensure_ca_and_server_cert(tmp_path)
    assert (again.server_cert.read_bytes(), again.ca_cert.read_bytes()) == first

    cert = x509.load_pem_x509_certificate(paths.server_cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    cert.verify_directly_issued_by(ca)


def test_a_new_host_gets_a_new_server_certificate_from_the_same_ca(tmp_path):
    paths = security.ensure_ca_and_server_cert(tmp_path)
    ca_before = paths.ca_cert.read_bytes()
    server_before = paths.server_cert.read_bytes()
    security.ensure_ca_and_server_cert(tmp_path, hosts=("127.0.0.1", "localhost", "podway.example"))
    assert paths.ca_cert.read_bytes() == ca_before
    assert paths.server_cert.read_bytes() != server_before


def test_a_damaged_key_is_replaced(tmp_path):
    paths = security.ensure_ca_and_server_cert(tmp_path)
    paths.server_key.write_text("not a key")
    security.ensure_ca_and_server_cert(tmp_path)
    assert b"PRIVATE KEY" in paths.server_key.read_bytes()


def test_tokens_read_kube_apiservers_csv():
    tokens = Tokens.parse(
        '# comment\nabc,alice,u1,"podway:read-write,team"\nxyz,viewer,u2,podway:read-only\nq,bob,u3\n'
    )
    assert tokens.authenticate("Bearer abc") == User("alice", "u1", ("podway:read-write", "team"))
    assert tokens.authenticate("bearer xyz") == User("viewer", "u2", ("podway:read-only",))
    assert tokens.authenticate("Bearer q") == User("bob", "u3", ())
    for header in (None, "", "Bearer", "Bearer nope", "Basic abc", "abc"):
        assert tokens.authenticate(header) is None


def test_a_malformed_token_row_names_its_line():
    with pytest.raises(ValueError, match="line 2"):
        Tokens.parse("a,b,c\nonly-two,x\n")


@pytest.mark.parametrize(
    ("groups", "allowed"),
    [
        (("system:masters",), VERBS),
        (("podway:read-write",), VERBS),
        (("podway:read-only",), {"get", "list", "watch"}),
        (("team",), set()),
    ],
)
def test_the_role_decides_the_verbs(groups, allowed):
    user = User("u", "u", groups)
    assert {verb for verb in VERBS if authorize(user, verb)} == allowed


def test_default_tokens_give_an_admin_and_a_viewer_and_are_kept(tmp_path):
    path = security.generate_default_tokens(tmp_path)
    assert mode(path) == 0o600
    tokens = Tokens.load(path)
    admin, viewer = tokens.token_of("podway-admin"), tokens.token_of("viewer")
    assert admin
    assert viewer
    assert admin != viewer
    assert len(admin) >= 40
    admin_user = tokens.authenticate(f"Bearer {admin}")
    viewer_user = tokens.authenticate(f"Bearer {viewer}")
    assert admin_user is not None
    assert authorize(admin_user, "create")
    assert viewer_user is not None
    assert authorize(viewer_user, "list")
    assert not authorize(viewer_user, "create")
    security.generate_default_tokens(tmp_path)
    assert Tokens.load(path).token_of("podway-admin") == admin


def test_the_kubeconfig_is_standard_and_private(tmp_path):
    paths = security.ensure_ca_and_server_cert(tmp_path)
    config_path = security.write_kubeconfig(
        tmp_path / "kubeconfig", "https://127.0.0.1:6443", paths.ca_cert, "tok"
    )
    assert mode(config_path) == 0o600
    config = yaml.safe_load(config_path.read_text())
    assert config["current-context"] == "podway"
    assert config["contexts"][0]["context"] == {
        "cluster": "podway",
        "user": "podway-admin",
        "namespace": "default",
    }
    assert config["users"] == [{"name": "podway-admin", "user": {"token": "tok"}}]
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == paths.ca_cert.read_bytes()


# ---------------------------------------------------------------- the real clients over TLS


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def endpoint(tmp_path) -> Iterator[tuple[str, security.Paths, Tokens]]:
    """A tiny HTTPS server answering /version to a valid token, 401 otherwise, in its own thread."""
    paths = security.ensure_ca_and_server_cert(tmp_path / "pki")
    tokens = Tokens.load(security.generate_default_tokens(tmp_path))

    async def version(request: web.Request) -> web.Response:
        if tokens.authenticate(request.headers.get("Authorization")) is None:
            return web.json_response(status.unauthorized(), status=401)
        return web.json_response(VERSION)

    port = free_port()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/version/", version)  # the Python client asks with the slash
    runner = web.AppRunner(app)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=security.server_ssl_context(paths))
        loop.run_until_complete(site.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield f"https://127.0.0.1:{port}", paths, tokens
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def kubectl_version(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "version", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_verifies_the_server_and_sends_the_token(endpoint, tmp_path):
    url, paths, tokens = endpoint
    admin = tokens.token_of("podway-admin")
    assert admin is not None
    good = security.write_kubeconfig(tmp_path / "good", url, paths.ca_cert, admin)
    result = kubectl_version(good)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["serverVersion"]["gitVersion"] == "v1.36.0-podway"

    wrong = security.write_kubeconfig(tmp_path / "wrong", url, paths.ca_cert, "not-a-token")
    result = kubectl_version(wrong)
    assert result.returncode != 0
    assert "You must be logged in to the server" in result.stderr

    other_ca = security.ensure_ca_and_server_cert(tmp_path / "other-pki")
    untrusted = security.write_kubeconfig(tmp_path / "untrusted", url, other_ca.ca_cert, admin)
    result = kubectl_version(untrusted)
    assert result.returncode != 0
    assert "certificate" in result.stderr


def test_the_kubernetes_client_verifies_the_server_and_sends_the_token(endpoint, tmp_path):
    kubernetes = pytest.importorskip("kubernetes")
    url, paths, tokens = endpoint
    viewer = tokens.token_of("viewer")
    assert viewer is not None
    good = security.write_kubeconfig(tmp_path / "good", url, paths.ca_cert, viewer, user="viewer")
    client = kubernetes.config.new_client_from_config(config_file=str(good))
    info = kubernetes.client.VersionApi(client).get_code()
    assert info.git_version == "v1.36.0-podway"

    wrong = security.write_kubeconfig(tmp_path / "wrong", url, paths.ca_cert, "not-a-token")
    client = kubernetes.config.new_client_from_config(config_file=str(wrong))
    with pytest.raises(kubernetes.client.exceptions.ApiException) as refused:
        kubernetes.client.VersionApi(client).get_code()
    assert refused.value.status == 401
    assert json.loads(refused.value.body) == status.unauthorized()


def test_load_kube_config_reaches_the_server(endpoint, tmp_path):
    kubernetes = pytest.importorskip("kubernetes")
    url, paths, tokens = endpoint
    admin = tokens.token_of("podway-admin")
    assert admin is not None
    good = security.write_kubeconfig(tmp_path / "good", url, paths.ca_cert, admin)
    kubernetes.config.load_kube_config(config_file=str(good))
    assert kubernetes.client.VersionApi().get_code().git_version == "v1.36.0-podway"
