"""docker-compose.yml cannot run here (no Docker engine): check it statically against the project."""

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from libs.client.commands.stack import parse_age
from libs.messaging.permissions import user

ROOT = Path(__file__).resolve().parents[3]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def console_scripts() -> dict[str, str]:
    scripts: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return scripts


def test_every_compose_command_is_a_console_script_whose_module_exists():
    scripts = console_scripts()
    for name, service in compose()["services"].items():
        command = service.get("command")
        if name in ("nats", "postgres"):
            continue
        assert command, f"{name} has no command"
        assert command[0] in scripts, f"{name} runs {command[0]}, not a Podway entry point"
        module = scripts[command[0]].split(":")[0]
        assert importlib.util.find_spec(module) is not None, f"{name}: {module} does not exist"


def test_every_podway_service_reaches_nats_and_the_database_after_migrating():
    services = compose()["services"]
    for name, service in services.items():
        if name in ("nats", "postgres"):
            continue
        env = service.get("environment", {})
        assert env.get("PODWAY_NATS_URL", "").startswith("nats://nats:")
        assert "@postgres:5432/" in env.get("PODWAY_DATABASE_URL", "")
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
        if name != "migrate":
            assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_every_service_module_in_the_repository_is_deployed():
    deployed = {s["command"][0] for n, s in compose()["services"].items() if n not in ("nats", "postgres")}
    for service_dir in sorted((ROOT / "services").iterdir()):
        if (service_dir / "main.py").exists() and (service_dir / "app.py").exists():
            assert f"podway-{service_dir.name.replace('_', '-')}" in deployed, service_dir.name


def test_nats_runs_the_deployed_config_with_every_password_it_reads():
    nats = compose()["services"]["nats"]
    config_in_container = nats["command"][nats["command"].index("-c") + 1]
    assert f"./deploy/nats/nats-server.conf:{config_in_container}:ro" in nats["volumes"]
    variables = set(re.findall(r"\$(NATS_\w+_PASSWORD)", (ROOT / "deploy/nats/nats-server.conf").read_text()))
    assert variables
    assert set(nats["environment"]) == variables


def test_every_podway_service_connects_as_its_own_nats_user_with_that_users_password():
    services = compose()["services"]
    nats_env = services["nats"]["environment"]
    for name, service in services.items():
        if name in ("nats", "postgres"):
            continue
        command = service["command"]
        expected = (
            command[1] if command[0] == "podway" else command[0].removeprefix("podway-").replace("-", "_")
        )
        env = service["environment"]
        assert env["PODWAY_NATS_USER"] == expected, name
        assert env["PODWAY_NATS_PASSWORD"] == nats_env[user(expected).password_variable], name


@pytest.mark.parametrize(("text", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("45m", 2700), ("9s", 9)])
def test_retention_ages_parse(text, seconds):
    assert parse_age(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "d", "3x", "1.5h", "-1d"])
def test_a_bad_retention_age_is_refused(text):
    with pytest.raises(ValueError, match="invalid age"):
        parse_age(text)
