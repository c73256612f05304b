"""The policy loader: the example policy (deploy/router/policy.yaml) loads, and every error names its field path."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from libs.core.routing import LatencyClass, PolicyError, Tier, load_policy, parse_policy, policy_json_schema
from tests.unit.routing.policies import EXAMPLE_POLICY_TEXT, example_document


def messages(document: object) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(document)
    return [str(issue) for issue in caught.value.issues]


def test_the_example_policy_loads() -> None:
    policy = load_policy(EXAMPLE_POLICY_TEXT)
    assert policy.deployments["claude-haiku-pt"].tier is Tier.PROVISIONED
    assert policy.deployments["claude-haiku-od"].model == "anthropic.claude-3-haiku-20240307-v1:0"
    assert policy.features["channel-recap"].latency is LatencyClass.ASYNC
    assert policy.features["search-answer"].routes[1].models == ("claude-haiku", "gemini-flash")
    assert policy.breaker.ramp == (0.01, 0.05, 0.25, 1.0)


def test_the_example_policy_validates_against_the_json_schema() -> None:
    jsonschema.validate(yaml.safe_load(EXAMPLE_POLICY_TEXT), policy_json_schema())


def test_non_positive_route_weight_is_reported_at_its_path() -> None:
    document = example_document()
    document["features"]["search-answer"]["routes"][0]["weight"] = 0
    assert messages(document) == ["features.search-answer.routes[0].weight: must be > 0"]


def test_model_pointing_at_unknown_deployment_is_reported() -> None:
    document = example_document()
    document["models"]["gemini-flash"].append("gemini-pro-od")
    assert messages(document) == [
        "models.gemini-flash[2]: unknown deployment 'gemini-pro-od' "
        "(known: claude-haiku-od, claude-haiku-pt, gemini-flash-od, gemini-flash-pt)"
    ]


def test_deployment_pointing_at_unknown_provider_is_reported() -> None:
    document = example_document()
    document["deployments"]["gemini-flash-od"]["provider"] = "azure"
    assert messages(document) == [
        "deployments.gemini-flash-od.provider: unknown provider 'azure' (known: bedrock, vertex)"
    ]


def test_route_naming_unknown_model_and_key_naming_unknown_feature_are_both_reported() -> None:
    document = example_document()
    document["features"]["channel-recap"]["routes"][0]["models"] = ["claude-haiku", "llama"]
    document["api_keys"]["team-search"]["features"] = ["search"]
    assert messages(document) == [
        "features.channel-recap.routes[0].models[1]: unknown model 'llama' (known: claude-haiku, gemini-flash)",
        "api_keys.team-search.features[0]: unknown feature 'search'",
    ]


def test_provisioned_deployment_needs_capacity() -> None:
    document = example_document()
    del document["deployments"]["gemini-flash-pt"]["capacity"]
    assert messages(document) == ["deployments.gemini-flash-pt.capacity: required for tier provisioned"]


def test_schema_errors_name_every_bad_field() -> None:
    document = example_document()
    document["deployments"]["claude-haiku-od"]["tier"] = "spot"
    document["features"]["search-answer"]["deadline_ms"] = "soon"
    document["features"]["search-answer"]["colour"] = "blue"
    assert messages(document) == [
        "deployments.claude-haiku-od.tier: must be one of 'provisioned' or 'on_demand'",
        "features.search-answer.deadline_ms: must be an integer",
        "features.search-answer.colour: unknown field",
    ]


def test_ramp_must_increase_to_one() -> None:
    document = example_document()
    document["breaker"]["ramp"] = [0.5, 0.25]
    assert messages(document) == ["breaker.ramp: steps must increase"]


def test_provider_kind_fields_are_required() -> None:
    document = example_document()
    document["providers"]["vertex"] = {"kind": "vertex", "project": "acme-ai"}
    assert messages(document) == ["providers.vertex.location: required for kind vertex"]


def test_invalid_yaml_is_a_policy_error() -> None:
    with pytest.raises(PolicyError, match="not valid YAML"):
        load_policy("providers: [unclosed")


def test_a_single_bad_route_is_reported_once() -> None:
    document = example_document()
    document["features"]["channel-recap"]["routes"][0]["weight"] = -1
    assert messages(document) == ["features.channel-recap.routes[0].weight: must be > 0"]
