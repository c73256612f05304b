"""deploy/k8s validated offline against the Kubernetes schemas (`kubernetes-validate`), and checked against the
project: entry points, NATS users and passwords, the replicated JetStream cluster, replicas, scraping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from libs.messaging.permissions import USERS, user
from tests.unit.deploy.test_compose import entry_module

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.36.0"


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in documents() if doc["kind"] == kind}


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec: list[dict[str, Any]] = workload["spec"]["template"]["spec"]["containers"]
    return spec


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize(("file", "doc"), documents(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_manifest_is_valid_against_the_kubernetes_schemas(file, doc):
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_validation_refuses_what_a_cluster_would():
    deployment = dict(of_kind("Deployment")["scheduler"])
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}, KUBERNETES_VERSION, strict=True
        )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**deployment, "spek": {}}, KUBERNETES_VERSION, strict=True)


def test_nats_is_a_three_node_jetstream_cluster_with_the_deployment_users():
    nats = of_kind("StatefulSet")["nats"]
    assert nats["spec"]["replicas"] == 3
    config = of_kind("ConfigMap")["nats-config"]["data"]["nats-server.conf"]
    routes = re.findall(r"nats://(nats-\d)\.nats\.podway\.svc\.cluster\.local:6222", config)
    assert routes == ["nats-0", "nats-1", "nats-2"]
    assert "sync_interval: always" in config
    deployed = (ROOT / "deploy/nats/nats-server.conf").read_text()
    # The same users and permissions as the rendered deployment config (libs/messaging/permissions.py).
    assert config[config.index("accounts {") :] == deployed[deployed.index("accounts {") :]
    passwords = set(re.findall(r"\$(NATS_\w+_PASSWORD)", config))
    (container,) = containers(nats)
    secret = of_kind("Secret")["nats-passwords"]["stringData"]
    assert passwords <= set(env_of(container))
    assert passwords <= set(secret)
    assert all(not value[0].isdigit() for value in secret.values())


def test_every_service_runs_a_real_entry_point_as_its_own_nats_user():
    workloads = {**of_kind("Deployment"), **of_kind("Job")}
    secret = of_kind("Secret")["nats-passwords"]["stringData"]
    podway = {n: w for n, w in workloads.items() if containers(w)[0]["image"].startswith("podway:")}
    assert {
        "admission",
        "scheduler",
        "preemptor",
        "dra-allocator",
        "node-agent",
        "api-server",
        "llm-router",
        "podway-migrate",
    } == set(podway)
    for name, workload in podway.items():
        (container,) = containers(workload)
        entry_module(container["command"])
        env = env_of(container)
        nats_user = user(env["PODWAY_NATS_USER"])
        assert env["PODWAY_NATS_PASSWORD"]["secretKeyRef"]["key"] == nats_user.password_variable, name
        assert nats_user.password_variable in secret
        assert env["PODWAY_DATABASE_URL"]["secretKeyRef"] == {"name": "podway-database", "key": "url"}, name
        assert env["PODWAY_NATS_URL"] == "nats://nats:4222"
    assert {u.name for u in USERS} >= {env_of(containers(w)[0])["PODWAY_NATS_USER"] for w in podway.values()}


def test_streams_are_replicated_and_services_scale_as_their_roles_allow():
    (migrate,) = containers(of_kind("Job")["podway-migrate"])
    assert env_of(migrate)["PODWAY_STREAM_REPLICAS"] == "3"
    deployments = of_kind("Deployment")
    for leased in ("scheduler", "preemptor", "dra-allocator"):
        assert deployments[leased]["spec"]["replicas"] == 2, leased
    for scaled in ("admission", "llm-router"):
        assert deployments[scaled]["spec"]["replicas"] >= 2, scaled
    assert of_kind("Service")["llm-router"]["spec"]["selector"] == {"app.kubernetes.io/name": "llm-router"}


def test_prometheus_scrapes_every_service_pod():
    config = yaml.safe_load(of_kind("ConfigMap")["prometheus-config"]["data"]["prometheus.yml"])
    (job,) = config["scrape_configs"]
    assert job["kubernetes_sd_configs"][0]["role"] == "pod"
    for name, deployment in of_kind("Deployment").items():
        if name == "prometheus":
            continue
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        (container,) = containers(deployment)
        assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": "9100"}, name
        assert env_of(container)["PODWAY_METRICS_PORT"] == "9100"
        assert env_of(container)["PODWAY_METRICS_HOST"] == "0.0.0.0"
