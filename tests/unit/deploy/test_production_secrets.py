"""deploy/k8s/production-secrets.sh, run with --dry-run (kubectl and openssl, offline): it makes every Secret
the production overlay's pods read, with the keys they read, route credentials that agree with the routes
they list (the StatefulSet's names), and a route certificate for those names, for server and client use,
issued by the CA it ships."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from libs.messaging.permissions import USERS
from tests.unit.deploy.test_kubernetes import containers, env_of, of_kind, pod, rendered, workloads

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "deploy" / "k8s" / "production-secrets.sh"
NAMESPACE = "podway"


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bytes]]:
    for tool in ("kubectl", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not on PATH: the Secrets script is not run")
    keys = tmp_path_factory.mktemp("keys") / "api-keys.yaml"
    keys.write_text("{team-search: {features: [search-answer]}}\n")
    env = {
        **os.environ,
        "DATABASE_URL": "postgresql+asyncpg://podway:pw@/podway?host=a:5432",
        "API_KEYS_FILE": str(keys),
    }
    out = subprocess.run(
        ["bash", str(SCRIPT), NAMESPACE, "--dry-run"], capture_output=True, text=True, check=True, env=env
    )
    found = {}
    for doc in yaml.safe_load_all(out.stdout):
        if doc:
            assert doc["metadata"]["namespace"] == NAMESPACE
            found[doc["metadata"]["name"]] = {k: base64.b64decode(v) for k, v in doc["data"].items()}
    return found


def test_every_secret_the_production_pods_read_is_made_with_the_keys_they_read(secrets):
    docs = rendered("production")
    for name, workload in workloads(docs).items():
        for container in containers(workload, init=True):
            for value in env_of(container).values():
                if isinstance(value, dict) and "secretKeyRef" in value:
                    assert value["secretKeyRef"]["key"] in secrets[value["secretKeyRef"]["name"]], name
        for volume in pod(workload).get("volumes", []):
            if "secret" in volume and not volume["secret"].get("optional"):
                assert volume["secret"]["secretName"] in secrets, name
    passwords = secrets["nats-passwords"]
    assert set(passwords) == {u.password_variable for u in USERS} | {"NATS_SYS_PASSWORD"}
    assert not any(p[:1].isdigit() for p in passwords.values())
    assert len(set(passwords.values())) == len(passwords)
    assert yaml.safe_load(secrets["llm-router-api-keys"]["api-keys.yaml"]) == {
        "team-search": {"features": ["search-answer"]}
    }


def test_the_routes_use_the_route_credentials_and_the_statefulsets_names(secrets):
    nats = of_kind(rendered("production"), "StatefulSet")["nats"]
    routes = secrets["nats-routes"]["routes.conf"].decode()
    user, password = re.search(r'authorization \{ user: (\S+), password: "([^"]+)" \}', routes).groups()  # type: ignore[union-attr]
    listed = re.findall(r"nats-route://([^:]+):([^@]+)@([^:]+):(\d+)", routes)
    service = nats["spec"]["serviceName"]
    assert listed == [
        (user, password, f"nats-{i}.{service}.{NAMESPACE}.svc.cluster.local", "6222")
        for i in range(nats["spec"]["replicas"])
    ]


def test_the_route_certificate_names_every_server_for_both_ends_and_is_issued_by_the_ca(secrets):
    tls = secrets["nats-route-tls"]
    cert = x509.load_pem_x509_certificate(tls["tls.crt"])
    ca = x509.load_pem_x509_certificate(tls["ca.crt"])
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    service = of_kind(rendered("production"), "StatefulSet")["nats"]["spec"]["serviceName"]
    assert names == [f"*.{service}.{NAMESPACE}.svc.cluster.local"]
    usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert usages == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert b"PRIVATE KEY" in tls["tls.key"]
