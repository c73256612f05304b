"""Provider endpoints in the policy file come from the environment, at start and on every reload alike."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from libs.core.routing import PolicyError
from libs.router import PolicyFileWatcher, read_policy_file
from libs.router.example_policy import EXAMPLE_POLICY_PATH as DEPLOYED

ENV = {"PODWAY_BEDROCK_ENDPOINT": "http://127.0.0.1:4001", "PODWAY_VERTEX_ENDPOINT": "http://127.0.0.1:4002"}


def test_the_deployed_policy_takes_the_emulators_endpoints_from_the_environment():
    policy = read_policy_file(DEPLOYED, ENV)
    assert policy.providers["bedrock"].endpoint_url == "http://127.0.0.1:4001"
    assert policy.providers["vertex"].api_endpoint == "http://127.0.0.1:4002"


def test_an_empty_variable_means_the_real_cloud():
    policy = read_policy_file(DEPLOYED, ENV | {"PODWAY_VERTEX_ENDPOINT": ""})
    assert policy.providers["vertex"].api_endpoint is None


def test_a_default_applies_when_the_variable_is_unset(tmp_path: Path):
    document = yaml.safe_load(DEPLOYED.read_text())
    document["providers"]["bedrock"]["region"] = "${BEDROCK_REGION:-eu-west-1}"
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(document))
    policy = read_policy_file(path, ENV)
    assert policy.providers["bedrock"].region == "eu-west-1"


def test_an_unset_variable_without_default_is_an_error_at_its_field():
    with pytest.raises(PolicyError) as caught:
        read_policy_file(DEPLOYED, {"PODWAY_VERTEX_ENDPOINT": ""})
    assert str(caught.value) == (
        f"{DEPLOYED}: providers.bedrock.endpoint_url: environment variable PODWAY_BEDROCK_ENDPOINT is not set"
    )


class ReloadCounter:
    def __init__(self) -> None:
        self.reloads = 0

    def reload(self, policy: object) -> None:
        self.reloads += 1


def test_an_unreadable_policy_file_keeps_the_policy_and_the_watching(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEPLOYED.read_text())
    router = ReloadCounter()
    watcher = PolicyFileWatcher(router, path, env=ENV)  # type: ignore[arg-type]
    path.unlink()
    path.mkdir()  # briefly a directory: stat works, read fails
    assert watcher.check() is False
    path.rmdir()
    path.write_text(DEPLOYED.read_text())
    assert watcher.check() is True
    assert router.reloads == 1


def test_a_policy_file_that_could_not_be_read_is_read_again_at_the_next_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEPLOYED.read_text())
    router = ReloadCounter()
    watcher = PolicyFileWatcher(router, path, env=ENV)  # type: ignore[arg-type]
    path.write_text(DEPLOYED.read_text() + "\n# edited\n")
    real_read_text = Path.read_text

    def denied(self: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)
    assert watcher.check() is False
    monkeypatch.setattr(Path, "read_text", real_read_text)
    assert watcher.check() is True


def test_a_policy_file_gone_is_logged_once_and_read_again_when_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEPLOYED.read_text())
    router = ReloadCounter()
    watcher = PolicyFileWatcher(router, path, env=ENV)  # type: ignore[arg-type]
    path.unlink()
    with caplog.at_level(logging.WARNING):
        assert watcher.check() is False
        assert watcher.check() is False
    assert [r.getMessage() for r in caplog.records] == [
        f"policy file {path} is gone; the policy in force stays, and the file is read again once it is back"
    ]
    path.write_text(DEPLOYED.read_text() + "\n# back\n")
    assert watcher.check() is True
    assert router.reloads == 1


def test_a_policy_file_that_is_not_utf8_is_refused_as_a_file_with_mistakes(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DEPLOYED.read_text())
    errors: list[PolicyError] = []
    router = ReloadCounter()
    watcher = PolicyFileWatcher(router, path, on_error=errors.append, env=ENV)  # type: ignore[arg-type]
    path.write_bytes(b"providers: \xff\xfe half-written\n")
    assert watcher.check() is False
    assert [str(e) for e in errors] == [
        f"{path}: <document>: not UTF-8 text: 'utf-8' codec can't decode byte 0xff in position 11: "
        "invalid start byte"
    ]
    assert router.reloads == 0
