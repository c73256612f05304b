"""Warnings about a policy edit that validates but may not be what its author meant (a file cut short)."""

from __future__ import annotations

from libs.core.routing import changed_providers, edit_warnings, load_policy, parse_policy
from tests.unit.routing.policies import EXAMPLE_POLICY_TEXT, example_document, make_policy


def cut_before(section: str):
    return load_policy(EXAMPLE_POLICY_TEXT[: EXAMPLE_POLICY_TEXT.index(f"\n{section}:")])


def test_a_file_cut_before_its_api_keys_warns_that_every_caller_gets_401() -> None:
    assert edit_warnings(make_policy(), cut_before("api_keys")) == [
        "api_keys: none left (the policy in force had 1): every caller of the OpenAI front now gets 401"
    ]


def test_a_file_cut_before_its_breaker_warns_that_the_defaults_apply() -> None:
    assert edit_warnings(make_policy(), cut_before("breaker")) == [
        "api_keys: none left (the policy in force had 1): every caller of the OpenAI front now gets 401",
        "breaker: the section is gone: the default breaker settings apply",
    ]


def test_an_edit_that_keeps_some_keys_and_the_breaker_warns_of_nothing() -> None:
    two_keys = make_policy(
        api_keys={"team-search": {"features": ["search-answer"]}, "team-b": {"features": ["search-answer"]}}
    )
    assert edit_warnings(two_keys, make_policy()) == []
    assert edit_warnings(cut_before("api_keys"), cut_before("api_keys")) == []


def test_changed_providers_are_those_of_both_policies_defined_differently() -> None:
    document = example_document()
    document["providers"]["vertex"]["api_endpoint"] = "http://127.0.0.1:4002"
    document["providers"]["extra"] = {"kind": "bedrock", "region": "eu-west-1"}
    assert changed_providers(make_policy(), parse_policy(document)) == ["vertex"]
