"""Provider endpoints in the policy file come from the environment, at start and on every reload alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from libs.core.routing import PolicyError
from libs.router import read_policy_file
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
