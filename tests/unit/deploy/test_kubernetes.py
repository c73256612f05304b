"""deploy/k8s (Kustomize) rendered and validated offline against the Kubernetes schemas (`kubernetes-validate`),
and checked against the project: entry points, NATS users and passwords, the replicated JetStream cluster,
probes reading the health beats, security contexts, disruption budgets, network policies, stream limits below
the volume, the router's policy and keys, scraping.

Each overlay is rendered with `kubectl kustomize` (the kubectl on PATH; without one those tests skip, saying
so). The base's own files are also validated without kubectl, so the schemas are checked everywhere.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from libs.messaging.durable_names import durable_name
from libs.messaging.permissions import USERS, user
from libs.router.policy_file import read_policy_file
from tests.unit.deploy.test_compose import entry_module

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
OVERLAYS = ("dev", "production")
KUBERNETES_VERSION = "1.36.0"
SERVICES = ("admission", "scheduler", "preemptor", "dra-allocator", "node-agent", "api-server", "llm-router")
LEASED = ("scheduler", "preemptor", "dra-allocator")
Doc = dict[str, Any]


@functools.cache
def rendered(overlay: str) -> tuple[Doc, ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(
            "kubectl is not on PATH: the overlays are not rendered (the base's files are still checked)"
        )
    out = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, check=True
    )
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def base_documents() -> list[tuple[str, Doc]]:
    found = []
    for path in sorted(BASE.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def of_kind(docs: tuple[Doc, ...], kind: str) -> dict[str, Doc]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def unhashed(name: str) -> str:
    """A generated ConfigMap's or Secret's name without the hash Kustomize adds to it."""
    return re.sub(r"-[a-z0-9]{10}$", "", name)


def named(docs: tuple[Doc, ...], kind: str, name: str) -> Doc:
    (doc,) = [d for n, d in of_kind(docs, kind).items() if unhashed(n) == name]
    return doc


def workloads(docs: tuple[Doc, ...]) -> dict[str, Doc]:
    return {**of_kind(docs, "Deployment"), **of_kind(docs, "StatefulSet"), **of_kind(docs, "Job")}


def pod(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def containers(workload: Doc, *, init: bool = False) -> list[Doc]:
    spec = pod(workload)
    return [*(spec.get("initContainers", []) if init else []), *spec["containers"]]


def env_of(container: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def podway(docs: tuple[Doc, ...]) -> dict[str, Doc]:
    return {n: w for n, w in workloads(docs).items() if containers(w)[0]["image"].startswith("podway:")}


def size_bytes(text: str) -> int:
    """A Kubernetes quantity (Gi, Mi) or a nats-server size (GB, MB: nats-server counts them in powers of two)."""
    number, unit = re.fullmatch(r"(\d+)([A-Za-z]*)", text).groups()  # type: ignore[union-attr]
    scale = {
        "": 1,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "MB": 2**20,
        "GB": 2**30,
        "TB": 2**40,
    }
    return int(number) * scale[unit]


# --- schemas ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "doc"), base_documents(), ids=lambda v: v if isinstance(v, str) else v["kind"]
)
def test_every_file_of_the_base_is_valid_against_the_kubernetes_schemas(file, doc):
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_manifest_is_valid_against_the_kubernetes_schemas(overlay):
    docs = rendered(overlay)
    assert len(docs) > 30
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert {doc["metadata"].get("namespace") for doc in docs if doc["kind"] != "Namespace"} == {"podway"}


def test_the_validation_refuses_what_a_cluster_would():
    deployment = next(d for _, d in base_documents() if d["metadata"]["name"] == "scheduler")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}, KUBERNETES_VERSION, strict=True
        )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**deployment, "spek": {}}, KUBERNETES_VERSION, strict=True)


# --- NATS -------------------------------------------------------------------------------------------------


def test_production_runs_three_nats_servers_on_three_nodes_that_a_drain_takes_one_at_a_time():
    docs = rendered("production")
    nats = of_kind(docs, "StatefulSet")["nats"]
    assert nats["spec"]["replicas"] == 3
    (term,) = pod(nats)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == nats["spec"]["selector"]["matchLabels"]
    budget = of_kind(docs, "PodDisruptionBudget")["nats"]
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"] == nats["spec"]["selector"]
    (migrate,) = containers(of_kind(docs, "Job")["podway-migrate"])
    assert env_of(migrate)["PODWAY_STREAM_REPLICAS"] == "3"


def test_the_nats_config_has_the_deployment_users_and_the_cluster_routes_authenticated_over_tls():
    docs = rendered("production")
    config = named(docs, "ConfigMap", "nats-config")["data"]
    server, cluster = config["nats-server.conf"], config["cluster.conf"]
    deployed = (ROOT / "deploy/nats/nats-server.conf").read_text()
    # The same users and permissions as the rendered deployment config (libs/messaging/permissions.py).
    assert server[server.index("accounts {") :] == deployed[deployed.index("accounts {") :]
    assert "sync_interval: always" in server
    assert "include ./cluster.conf" in server
    assert "include ../routes/routes.conf" in cluster
    tls = cluster[cluster.index("tls {") :]
    assert "verify: true" in tls
    nats = of_kind(docs, "StatefulSet")["nats"]
    server_container = next(c for c in containers(nats) if c["name"] == "nats")
    mounts = {m["mountPath"]: m["name"] for m in server_container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod(nats)["volumes"]}
    config_dir = Path(server_container["command"][server_container["command"].index("-c") + 1]).parent
    assert volumes[mounts[str(config_dir)]]["configMap"]["name"].startswith("nats-config")
    assert volumes[mounts[str((config_dir / "../routes").resolve())]]["secret"]["secretName"] == "nats-routes"
    for file in re.findall(r"_file: (\S+)", tls):
        assert volumes[mounts[str(Path(file).parent)]]["secret"]["secretName"] == "nats-route-tls"
        assert Path(file).name in ("tls.crt", "tls.key", "ca.crt")
    passwords = set(re.findall(r"\$(NATS_\w+_PASSWORD)", server))
    env = env_of(server_container)
    assert passwords == {u.password_variable for u in USERS} | {"NATS_SYS_PASSWORD"}
    assert all(
        (unhashed(env[p]["secretKeyRef"]["name"]), env[p]["secretKeyRef"]["key"]) == ("nats-passwords", p)
        for p in passwords
    )
    assert set(re.findall(r":\s*\$([A-Z_]+)", server)) <= set(env)


def test_dev_runs_one_nats_server_without_a_cluster_and_streams_of_one_replica():
    docs = rendered("dev")
    nats = of_kind(docs, "StatefulSet")["nats"]
    assert nats["spec"]["replicas"] == 1
    assert "cluster {" not in named(docs, "ConfigMap", "nats-config")["data"]["cluster.conf"]
    secrets = {v["secret"]["secretName"] for v in pod(nats)["volumes"] if "secret" in v}
    assert secrets == set()
    (migrate,) = containers(of_kind(docs, "Job")["podway-migrate"])
    assert env_of(migrate)["PODWAY_STREAM_REPLICAS"] == "1"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_streams_limits_stay_below_the_store_and_the_store_below_the_volume(overlay):
    docs = rendered(overlay)
    nats = of_kind(docs, "StatefulSet")["nats"]
    (server,) = [c for c in containers(nats) if c["name"] == "nats"]
    store = size_bytes(env_of(server)["NATS_MAX_FILE_STORE"])
    (claim,) = nats["spec"]["volumeClaimTemplates"]
    volume = size_bytes(claim["spec"]["resources"]["requests"]["storage"])
    env = env_of(containers(of_kind(docs, "Job")["podway-migrate"])[0])
    streams = [int(env[f"PODWAY_{name}_MAX_BYTES"]) for name in ("EVENTS", "WORK", "DLQ")]
    assert sum(streams) < store < volume
    memory = size_bytes(server["resources"]["limits"]["memory"])
    assert size_bytes(env_of(server)["GOMEMLIMIT"].replace("MiB", "Mi").replace("GiB", "Gi")) < memory


def test_prometheus_scrapes_nats_through_the_exporter_not_the_json_monitoring_endpoint():
    docs = rendered("production")
    nats = of_kind(docs, "StatefulSet")["nats"]
    annotations = nats["spec"]["template"]["metadata"]["annotations"]
    (exporter,) = [c for c in containers(nats) if "prometheus-nats-exporter" in c["image"]]
    port = {p["name"]: p["containerPort"] for p in exporter["ports"]}["metrics"]
    assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": str(port)}
    assert exporter["args"][exporter["args"].index("-port") + 1] == str(port)
    (server,) = [c for c in containers(nats) if c["name"] == "nats"]
    monitor = {p["name"]: p["containerPort"] for p in server["ports"]}["monitor"]
    assert exporter["args"][-1] == f"http://localhost:{monitor}"
    assert "-jsz=all" in exporter["args"]


# --- the services -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_runs_a_real_entry_point_as_its_own_nats_user(overlay):
    docs = rendered(overlay)
    services = podway(docs)
    assert {*SERVICES, "podway-migrate"} == set(services)
    for name, workload in services.items():
        container = containers(workload)[0]
        entry_module(container["command"])
        env = env_of(container)
        nats_user = user(env["PODWAY_NATS_USER"])
        password = env["PODWAY_NATS_PASSWORD"]["secretKeyRef"]
        assert (unhashed(password["name"]), password["key"]) == (
            "nats-passwords",
            nats_user.password_variable,
        )
        assert env["PODWAY_NATS_URL"] == "nats://nats:4222"
        if name != "api-server":  # the API server reads and writes through admission
            assert env["PODWAY_DATABASE_URL"]["secretKeyRef"]["name"].startswith("podway-database"), name


def test_dev_makes_every_secret_the_pods_read():
    docs = rendered("dev")
    secrets = {unhashed(name): set(doc.get("data", {})) for name, doc in of_kind(docs, "Secret").items()}
    for name, workload in workloads(docs).items():
        for container in containers(workload, init=True):
            for value in env_of(container).values():
                if isinstance(value, dict) and "secretKeyRef" in value:
                    ref = value["secretKeyRef"]
                    assert ref["key"] in secrets[unhashed(ref["name"])], (name, ref)
        for volume in pod(workload).get("volumes", []):
            if "secret" in volume and not volume["secret"].get("optional"):
                assert unhashed(volume["secret"]["secretName"]) in secrets, name
    assert all(not v[0].isdigit() for v in named(docs, "Secret", "nats-passwords")["data"].values())


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_read_the_health_beats_in_the_data_directory(overlay):
    for name, workload in podway(rendered(overlay)).items():
        if name == "podway-migrate":
            continue
        container = containers(workload)[0]
        data_dir = env_of(container)["PODWAY_DATA_DIR"]
        mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod(workload)["volumes"]}
        assert "emptyDir" in volumes[mounted[data_dir]], name
        for kind, check in (("livenessProbe", "live"), ("readinessProbe", "ready"), ("startupProbe", "live")):
            command = container[kind]["exec"]["command"]
            assert command[:4] == ["python", "-m", "libs.runtime.probe", check], (name, kind)
            assert "--run-dir" not in command or command[command.index("--run-dir") + 1] == f"{data_dir}/run"
        assert data_dir == "/data"  # the probe's default run directory is /data/run


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_has_requests_and_limits_and_runs_restricted(overlay):
    for name, workload in workloads(rendered(overlay)).items():
        security = pod(workload)["securityContext"]
        assert security["runAsNonRoot"] is True, name
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert security["runAsUser"] > 0, name
        for container in containers(workload, init=True):
            where = f"{name}/{container['name']}"
            for bound in ("requests", "limits"):
                assert set(container["resources"][bound]) == {"cpu", "memory"}, where
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
    namespace = of_kind(rendered(overlay), "Namespace")["podway"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_leased_services_run_leader_and_standby_on_two_nodes():
    docs = rendered("production")
    deployments = of_kind(docs, "Deployment")
    budgets = of_kind(docs, "PodDisruptionBudget")
    for name in LEASED:
        deployment = deployments[name]
        assert deployment["spec"]["replicas"] == 2, name
        (term,) = pod(deployment)["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
        # no surge: a third pod would find no node of its own on a two-node pool
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0
        assert budgets[name]["spec"]["maxUnavailable"] == 1
    for scaled in ("admission", "llm-router"):
        assert deployments[scaled]["spec"]["replicas"] >= 3, scaled
        assert budgets[scaled]["spec"]["maxUnavailable"] == 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_node_agent_keeps_one_durable_consumer_its_nats_user_may_use(overlay):
    agent = of_kind(rendered(overlay), "StatefulSet")["node-agent"]
    assert agent["spec"]["replicas"] == 1
    instance = env_of(containers(agent)[0])["PODWAY_INSTANCE"]["fieldRef"]["fieldPath"]
    assert instance == "metadata.labels['apps.kubernetes.io/pod-index']"
    durables = {d.name for d in user("node_agent").durables}
    assert durable_name("node-agent", "0") in durables


def test_the_router_reads_its_policy_from_a_config_map_and_its_keys_from_a_secret(tmp_path: Path):
    docs = rendered("dev")
    router = of_kind(docs, "Deployment")["llm-router"]
    (init,) = pod(router)["initContainers"]
    volumes = {v["name"]: v for v in pod(router)["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
    policy_in, keys_in, policy_out = init["command"][3:]
    policy_volume = volumes[mounts[str(Path(policy_in).parent)]]
    keys_volume = volumes[mounts[str(Path(keys_in).parent)]]
    config = named(docs, "ConfigMap", unhashed(policy_volume["configMap"]["name"]))
    secret = named(docs, "Secret", unhashed(keys_volume["secret"]["secretName"]))
    assert "api_keys" not in yaml.safe_load(config["data"][Path(policy_in).name])

    # The init container's own command, on the rendered files.
    import base64

    (tmp_path / "policy.yaml").write_text(config["data"][Path(policy_in).name])
    (tmp_path / "keys.yaml").write_bytes(base64.b64decode(secret["data"][Path(keys_in).name]))
    command = [
        sys.executable,
        *init["command"][1:3],
        *(str(tmp_path / f) for f in ("policy.yaml", "keys.yaml")),
    ]
    subprocess.run([*command, str(tmp_path / "merged.yaml")], check=True)
    policy = read_policy_file(tmp_path / "merged.yaml", env={})
    assert set(policy.api_keys) == {"team-search"}
    assert all(p.endpoint_url is None and p.api_endpoint is None for p in policy.providers.values())

    (container,) = containers(router)
    assert env_of(container)["PODWAY_ROUTER_POLICY"] == policy_out
    assert {m["mountPath"]: m["name"] for m in container["volumeMounts"]}[str(Path(policy_out).parent)] == (
        mounts[str(Path(policy_out).parent)]
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_prometheus_scrapes_every_service_pod(overlay):
    docs = rendered(overlay)
    config = yaml.safe_load(named(docs, "ConfigMap", "prometheus-config")["data"]["prometheus.yml"])
    (job,) = config["scrape_configs"]
    assert job["kubernetes_sd_configs"][0]["role"] == "pod"
    (port_rule,) = [r for r in job["relabel_configs"] if r.get("action") == "keepequal"]
    assert port_rule["source_labels"] == ["__meta_kubernetes_pod_container_port_number"]
    assert port_rule["target_label"] == "__meta_kubernetes_pod_annotation_prometheus_io_port"
    for name, workload in workloads(docs).items():
        annotations = workload["spec"]["template"]["metadata"].get("annotations", {})
        if annotations.get("prometheus.io/scrape") == "true":
            declared = {p["containerPort"] for c in containers(workload) for p in c.get("ports", [])}
            assert int(annotations["prometheus.io/port"]) in declared, name  # or keepequal drops every target
    for name, workload in podway(docs).items():
        if name == "podway-migrate":
            continue
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        (container,) = containers(workload)
        assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": "9100"}, name
        assert env_of(container)["PODWAY_METRICS_PORT"] == "9100"
        assert env_of(container)["PODWAY_METRICS_HOST"] == "0.0.0.0"


# --- network policies -------------------------------------------------------------------------------------


def _selects(selector: Doc, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _peer_matches(peer: Doc, labels: dict[str, str] | None) -> bool:
    """A peer of a rule: a pod of the namespace (labels), or something outside it (None)."""
    if "podSelector" in peer and "namespaceSelector" not in peer:
        return labels is not None and _selects(peer["podSelector"], labels)
    return labels is None and "ipBlock" in peer


def allowed(
    docs: tuple[Doc, ...], source: dict[str, str] | None, target: dict[str, str] | None, port: int
) -> bool:
    """Whether the namespace's policies let `source` open a TCP connection to `target` on `port` (None: a
    peer outside the namespace, which no policy of ours selects). Both ends must allow it."""

    def permits(rules: list[Doc], peer_key: str, peer: dict[str, str] | None) -> bool:
        for rule in rules:
            ports = {p["port"] for p in rule.get("ports", [])}
            peers = rule.get(peer_key)
            if (not ports or port in ports) and (peers is None or any(_peer_matches(p, peer) for p in peers)):
                return True
        return False

    policies = of_kind(docs, "NetworkPolicy").values()

    def side(
        labels: dict[str, str] | None, kind: str, key: str, peer_key: str, peer: dict[str, str] | None
    ) -> bool:
        if labels is None:
            return True
        chosen = [
            p
            for p in policies
            if kind in p["spec"]["policyTypes"] and _selects(p["spec"]["podSelector"], labels)
        ]
        return bool(chosen) and any(permits(p["spec"].get(key, []), peer_key, peer) for p in chosen)

    return side(source, "Egress", "egress", "to", target) and side(
        target, "Ingress", "ingress", "from", source
    )


def pod_labels(workload: Doc) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_deny_by_default_and_allow_only_what_each_service_talks_to(overlay):
    docs = rendered(overlay)
    deny = of_kind(docs, "NetworkPolicy")["default-deny"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    every = workloads(docs)
    nats = pod_labels(every["nats"])
    prometheus = pod_labels(every["prometheus"])
    router, api = pod_labels(every["llm-router"]), pod_labels(every["api-server"])
    assert allowed(docs, nats, nats, 6222)
    assert allowed(docs, prometheus, nats, 7777)
    assert not allowed(docs, prometheus, nats, 4222)
    for name, workload in podway(docs).items():
        labels = pod_labels(workload)
        env = env_of(containers(workload)[0])
        assert allowed(docs, labels, nats, 4222), name
        assert not allowed(docs, labels, nats, 6222), name
        assert not allowed(docs, labels, nats, 8222), name
        if name != "podway-migrate":
            assert allowed(docs, prometheus, labels, 9100), name
            assert not allowed(docs, router, labels, 9100), name
        assert ("PODWAY_DATABASE_URL" in env) == (labels.get("podway.io/database-client") == "true"), name
        for other in ("llm-router", "api-server"):
            if name != other:
                assert not allowed(docs, labels, pod_labels(every[other]), 8080), name
    assert allowed(docs, None, router, 8080)
    assert allowed(docs, None, api, 6443)
    assert not allowed(docs, None, nats, 4222)
    assert not allowed(docs, api, router, 443)


def test_production_lets_the_database_clients_reach_postgresql_outside_the_cluster():
    docs = rendered("production")
    (rule,) = of_kind(docs, "NetworkPolicy")["database"]["spec"]["egress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 5432}]
    admission = pod_labels(workloads(docs)["admission"])
    assert allowed(docs, admission, None, 5432)
    assert not allowed(docs, pod_labels(workloads(docs)["api-server"]), None, 5432)
