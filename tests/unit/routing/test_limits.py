"""Per-request allowances: the feature's budget, the API key's budget and the key's request rate."""

from __future__ import annotations

from libs.core.routing import NO_CHARGE, Charge, LimitKind, NeverFits, Refusal, RequestLimits, parse_policy
from tests.unit.routing.policies import example_document, make_policy


def limits_for(*, feature_budget: int | None = None, key: dict[str, object] | None = None) -> RequestLimits:
    document = example_document()
    if feature_budget is not None:
        document["features"]["search-answer"]["budget"] = {"tokens_per_minute": feature_budget}
    else:
        document["features"]["search-answer"].pop("budget", None)
    document["features"]["channel-recap"].pop("budget", None)
    document["api_keys"] = {"team-search": {"features": ["search-answer"], **(key or {})}}
    return RequestLimits(parse_policy(document), None, 0.0, None)


def test_a_request_under_no_allowance_is_not_charged() -> None:
    assert limits_for().charge("search-answer", "team-search", 500, 400, 0.0) is NO_CHARGE


def test_a_key_over_its_request_rate_is_told_the_true_wait() -> None:
    limits = limits_for(key={"rate_limit": {"requests_per_minute": 60}})
    for _ in range(60):
        assert isinstance(limits.charge("search-answer", "team-search", 10, 10, 0.0), Charge)
    refused = limits.charge("search-answer", "team-search", 10, 10, 0.0)
    assert isinstance(refused, Refusal)
    assert refused.limit.kind is LimitKind.KEY_RATE
    assert refused.retry_after_s == 1.0  # one request a second comes back
    assert isinstance(limits.charge("search-answer", "team-search", 10, 10, 1.0), Charge)


def test_a_refusal_gives_back_what_the_other_allowances_took() -> None:
    limits = limits_for(feature_budget=1000, key={"budget": {"tokens_per_minute": 100_000}})
    assert isinstance(limits.charge("search-answer", "team-search", 900, 800, 0.0), Charge)
    refused = limits.charge("search-answer", "team-search", 900, 800, 0.0)
    assert isinstance(refused, Refusal)
    assert refused.limit.kind is LimitKind.FEATURE_BUDGET
    other_feature_key = limits.charge("channel-recap", "team-search", 99_100, 99_000, 0.0)
    assert isinstance(other_feature_key, Charge)  # the key's budget lost nothing to the refusal


def test_a_key_budget_is_charged_the_estimate_and_corrected_with_the_usage() -> None:
    limits = limits_for(key={"budget": {"tokens_per_minute": 1000}})
    charge = limits.charge("search-answer", "team-search", 900, 800, 0.0)
    assert isinstance(charge, Charge)
    assert isinstance(limits.charge("search-answer", "team-search", 900, 800, 0.0), Refusal)
    charge.settle(100, 0.0)
    assert isinstance(limits.charge("search-answer", "team-search", 800, 700, 0.0), Charge)


def test_a_request_above_a_minute_of_a_budget_could_never_fit_and_says_why() -> None:
    limits = limits_for(feature_budget=600)
    verdict = limits.charge("search-answer", "team-search", 5004, 5000, 0.0)
    assert isinstance(verdict, NeverFits)
    assert verdict.message.startswith("max_tokens: Invalid value: 5000: the request needs up to 5004 tokens")
    assert "features.search-answer.budget.tokens_per_minute (600 per minute)" in verdict.message


def test_an_unchanged_allowance_keeps_what_it_spent_across_a_reload() -> None:
    limits = limits_for(key={"rate_limit": {"requests_per_minute": 1}})
    assert isinstance(limits.charge("search-answer", "team-search", 1, 1, 0.0), Charge)
    key = {"features": ["search-answer"], "rate_limit": {"requests_per_minute": 1}}
    reloaded = RequestLimits(make_policy(api_keys={"team-search": key}), limits, 0.0, None)
    assert isinstance(reloaded.charge("search-answer", "team-search", 1, 1, 0.0), Refusal)
