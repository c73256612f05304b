"""docker-compose.yml cannot run here (no Docker engine): check it statically against the project. Every
command is a real entry point, every file it mounts is in the repository, the environment and dependencies
agree, each service connects as a NATS user that exists, Prometheus scrapes every service and the Grafana
dashboard plots metrics the services export."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from libs.client.cli import VERBS
from libs.messaging.permissions import USERS, user

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ("admission", "scheduler", "preemptor", "dra-allocator", "node-agent", "llm-router", "api-server")
LEASED = ("scheduler", "preemptor", "dra-allocator")


def compose(*files: str) -> dict[str, Any]:
    """The compose model, later files merged over earlier ones as `docker compose -f A -f B` does (mappings
    merged key by key, everything else replaced)."""

    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {k: merge(base[k], v) if k in base else v for k, v in over.items()} | {
                k: v for k, v in base.items() if k not in over
            }
        return over

    model: dict[str, Any] = {}
    for name in files or ("docker-compose.yml",):
        model = merge(model, yaml.safe_load((ROOT / name).read_text()))
    return model


def podway_services(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in model["services"].items() if s.get("image") == "podway:dev"}


def console_scripts() -> dict[str, str]:
    scripts: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return scripts


def entry_module(command: list[str]) -> str:
    """The module a container command runs: a console script's, `python -m MODULE`'s, or the CLI's."""
    scripts = console_scripts()
    if command[0] == "podway":
        assert command[1] in VERBS, f"podway has no verb {command[1]}"
        return scripts["podway"].split(":")[0]
    if command[0] == "python":
        assert command[1] == "-m"
        return command[2]
    assert command[0] in scripts, f"{command[0]} is not a Podway entry point"
    return scripts[command[0]].split(":")[0]


def test_one_image_runs_every_service_and_each_command_is_a_real_entry_point():
    services = podway_services(compose())
    assert set(SERVICES) <= set(services)
    assert (ROOT / "Dockerfile").exists()
    for name, service in services.items():
        assert service.get("build") == ".", name
        module = entry_module(service["command"])
        package = ROOT / Path(*module.split(".")[:-1])
        # The preemptor's and DRA allocator's entry points are declared before their code lands.
        found = importlib.util.find_spec(module) is not None or package.is_dir()
        assert found, f"{name}: {module} does not exist"


def test_every_service_script_of_the_project_is_deployed():
    deployed = {s["command"][0] for s in podway_services(compose()).values()}
    services = {script for script in console_scripts() if script.startswith("podway-")}
    assert services <= deployed


def test_every_mounted_file_is_in_the_repository():
    for file in ("docker-compose.yml", "docker-compose.clouds.yml"):
        for name, service in compose(file)["services"].items():
            for volume in service.get("volumes", []):
                source = volume.split(":")[0]
                if source.startswith("./"):
                    assert (ROOT / source).exists(), f"{file}: {name} mounts missing {source}"


def test_environment_and_dependencies_agree():
    model = compose()
    services = model["services"]
    postgres = services["postgres"]["environment"]
    database = (
        f"postgresql+asyncpg://{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}@postgres:5432/"
        f"{postgres['POSTGRES_DB']}"
    )
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
    for name in (*SERVICES, "migrate"):
        env = services[name]["environment"]
        assert env["PODWAY_NATS_URL"] == "nats://nats:4222", name
        assert env["PODWAY_DATABASE_URL"] == database, name
        if name != "migrate":
            assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
            assert env["PODWAY_METRICS_HOST"] == "0.0.0.0"
            assert env["PODWAY_METRICS_PORT"] == "9100"
            assert env["PODWAY_OTLP_ENDPOINT"].startswith("http://jaeger:4318")
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in services["postgres"]
    for name in LEASED:
        assert services[name]["deploy"]["replicas"] >= 2, f"{name} runs active/standby"


def test_nats_runs_the_deployed_config_with_every_password_it_reads():
    nats = compose()["services"]["nats"]
    config_in_container = nats["command"][nats["command"].index("-c") + 1]
    assert f"./deploy/nats/nats-server.conf:{config_in_container}:ro" in nats["volumes"]
    config = (ROOT / "deploy/nats/nats-server.conf").read_text()
    assert re.search(r"^\s*sync_interval: always\s*$", config, re.M)
    store = re.search(r"store_dir: (\S+)", config)
    assert store is not None
    assert any(v.endswith(":/data") and store.group(1).startswith("/data/") for v in nats["volumes"])
    variables = set(re.findall(r"\$(NATS_\w+_PASSWORD)", config))
    assert variables == {u.password_variable for u in USERS} | {"NATS_SYS_PASSWORD"}
    assert set(nats["environment"]) == variables


def test_every_podway_service_connects_as_its_own_nats_user_with_that_users_password():
    services = compose()["services"]
    nats_env = services["nats"]["environment"]
    for name in (*SERVICES, "migrate"):
        command = services[name]["command"]
        expected = (
            command[1] if command[0] == "podway" else command[0].removeprefix("podway-").replace("-", "_")
        )
        env = services[name]["environment"]
        assert env["PODWAY_NATS_USER"] == expected, name
        assert env["PODWAY_NATS_PASSWORD"] == nats_env[user(expected).password_variable], name


def test_the_router_uses_the_emulators_by_default_and_the_clouds_with_the_second_file():
    services = compose()["services"]
    emulators = services["emulators"]["command"]
    assert entry_module(emulators) == "libs.emulators"
    ports = {
        flag: emulators[emulators.index(flag) + 1] for flag in ("--bedrock-port", "--vertex-port", "--host")
    }
    env = services["llm-router"]["environment"]
    assert ports["--host"] == "0.0.0.0"
    assert env["PODWAY_BEDROCK_ENDPOINT"] == f"http://emulators:{ports['--bedrock-port']}"
    assert env["PODWAY_VERTEX_ENDPOINT"] == f"http://emulators:{ports['--vertex-port']}"
    policy = (ROOT / "deploy/router/policy.yaml").read_text()
    assert "${PODWAY_BEDROCK_ENDPOINT}" in policy
    assert "${PODWAY_VERTEX_ENDPOINT}" in policy
    assert env["PODWAY_ROUTER_POLICY"] == "/app/deploy/router/policy.yaml"

    clouds = compose("docker-compose.yml", "docker-compose.clouds.yml")["services"]
    assert clouds["llm-router"]["environment"]["PODWAY_BEDROCK_ENDPOINT"] == ""
    assert clouds["llm-router"]["environment"]["PODWAY_VERTEX_ENDPOINT"] == ""
    assert clouds["emulators"]["deploy"]["replicas"] == 0
    assert clouds["llm-router"]["depends_on"]["emulators"]["required"] is False


def test_prometheus_scrapes_every_service_on_its_metrics_port():
    model = compose()
    prometheus = model["services"]["prometheus"]
    assert "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    (podway,) = [job for job in config["scrape_configs"] if job["job_name"] == "podway"]
    (discovery,) = podway["dns_sd_configs"]
    assert set(discovery["names"]) == set(SERVICES)
    assert str(discovery["port"]) == model["services"]["admission"]["environment"]["PODWAY_METRICS_PORT"]


def documented_metrics() -> set[str]:
    """The metric names the metrics table of docs/operations.md documents."""
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page.split("### Metrics", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(podway_[a-z_]+)`", section))


def test_the_grafana_dashboard_is_provisioned_and_plots_documented_metrics():
    grafana = compose()["services"]["grafana"]
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana["volumes"]
    providers = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/podway.yml").read_text())
    assert providers["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    sources = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    assert sources["datasources"][0]["url"] == "http://prometheus:9090"
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/podway.json").read_text())
    documented = documented_metrics()
    plotted = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"podway_[a-z_]+", target["expr"])
    }
    assert plotted
    assert plotted <= documented, plotted - documented


@pytest.mark.parametrize("name", sorted(documented_metrics()))
def test_every_documented_metric_is_defined_by_the_code(name):
    sources = [*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py")]
    # prometheus_client adds `_total` to a counter's name when it is exported
    names = {f'"{name}"', f'"{name.removesuffix("_total")}"'}
    assert any(n in path.read_text() for path in sources for n in names), name


ONE_SHOT = ("migrate",)
"""Containers that run to completion: what needs them waits for `service_completed_successfully`."""
NO_HEALTHCHECK = {
    "nats-exporter": "its image holds the exporter alone (no shell or client); nothing needs it"
}


@pytest.mark.parametrize(
    "files", [("docker-compose.yml",), ("docker-compose.yml", "docker-compose.clouds.yml")]
)
def test_every_container_has_a_healthcheck_and_starts_after_what_it_needs_is_healthy(files):
    services = compose(*files)["services"]
    for name, service in services.items():
        if name in ONE_SHOT:
            assert service["restart"] == "no", name
        elif name not in NO_HEALTHCHECK:
            check = service["healthcheck"]["test"]
            assert check[0] == "CMD", name
            assert len(check) > 1, name
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        for dependency, rule in depends.items():
            wanted = "service_completed_successfully" if dependency in ONE_SHOT else "service_healthy"
            assert rule["condition"] == wanted, (name, dependency)
            assert dependency not in NO_HEALTHCHECK, (name, dependency)
    for name in (*SERVICES, "migrate"):
        assert services[name]["depends_on"]["nats"]["condition"] == "service_healthy", name
    for name in SERVICES:
        assert {"migrate", "postgres"} <= set(services[name]["depends_on"]), name


def test_podway_services_are_healthy_when_the_readiness_probe_says_so():
    for name, service in podway_services(compose()).items():
        if name in ONE_SHOT:
            continue
        check = service["healthcheck"]["test"][1:]
        if name == "emulators":
            assert check[:2] == ["python", "-c"]
            continue
        assert check == ["python", "-m", "libs.runtime.probe", "ready"], name
        # the probe's default run directory is the data directory's
        assert service["environment"]["PODWAY_DATA_DIR"] == "/data", name


def test_the_emulators_healthcheck_knocks_on_the_ports_they_listen_on():
    emulators = compose()["services"]["emulators"]
    command = emulators["command"]
    ports = {command[command.index(flag) + 1] for flag in ("--bedrock-port", "--vertex-port")}
    script = emulators["healthcheck"]["test"][-1]
    assert set(re.findall(r"\d{4}", script)) == ports


def test_prometheus_scrapes_nats_through_the_exporter():
    model = compose()
    exporter = model["services"]["nats-exporter"]
    command = exporter["command"]
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    (nats,) = [job for job in config["scrape_configs"] if job["job_name"] == "nats"]
    assert "metrics_path" not in nats  # the exporter serves /metrics
    assert nats["static_configs"][0]["targets"] == [f"nats-exporter:{command[command.index('-port') + 1]}"]
    assert command[-1] == "http://nats:8222"
    assert "8222:8222" in model["services"]["nats"]["ports"]


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined), one list per stage."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or (line.startswith("ARG ") and not stages):
            continue
        if line.startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_image_pins_uv_and_runs_as_a_numeric_non_root_user_on_a_read_only_environment():
    stages = dockerfile_stages()
    instructions = [i for stage in stages for i in stage]
    (uv,) = [i for i in instructions if "astral-sh/uv" in i]
    assert re.fullmatch(r"FROM ghcr\.io/astral-sh/uv:\d+\.\d+\.\d+ AS uv", uv), uv
    assert not any(re.search(r"pip install[^\n]*\buv\b(?!==)", i) for i in instructions)
    assert all("--frozen" in i for i in instructions if "uv sync" in i)
    runtime = stages[-1]
    (user_line,) = [i for i in runtime if i.startswith("USER ")]
    uid = user_line.split()[1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) > 0
    assert any("a-w" in i and "/opt/venv" in i for i in runtime if i.startswith("RUN "))
    assert runtime.index(user_line) == len(runtime) - 1 or all(
        not i.startswith("RUN ") for i in runtime[runtime.index(user_line) :]
    )
    assert not any("pip install" in i for i in runtime)
