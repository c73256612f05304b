"""Turns policy text into a validated RoutingPolicy, with every problem reported at its field path."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from libs.api.router_policy.policy import RoutingPolicy, Tier


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """One problem in a policy document, at a dotted field path such as `features.x.routes[0].weight`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class PolicyError(ValueError):
    """A policy document that cannot be used; `issues` lists every problem found."""

    def __init__(self, issues: Sequence[PolicyIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__("\n".join(str(issue) for issue in self.issues))


def load_policy(text: str) -> RoutingPolicy:
    """Parse YAML (or JSON) policy text and validate it; raises PolicyError naming each bad field path."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError([PolicyIssue("<document>", f"not valid YAML: {exc}")]) from exc
    return parse_policy(document)


def parse_policy(document: Any) -> RoutingPolicy:
    """Validate an already-parsed policy document (a mapping) and check its cross-references."""
    if not isinstance(document, Mapping):
        raise PolicyError([PolicyIssue("<document>", "must be a mapping")])
    try:
        policy = RoutingPolicy.model_validate(document)
    except ValidationError as exc:
        raise PolicyError(_schema_issues(exc)) from exc
    issues = list(cross_reference_issues(policy))
    if issues:
        raise PolicyError(issues)
    return policy


def policy_json_schema() -> dict[str, Any]:
    """The JSON Schema of the policy document, for editors and for validating policies outside Python."""
    return RoutingPolicy.model_json_schema()


def cross_reference_issues(policy: RoutingPolicy) -> Iterator[PolicyIssue]:
    """Names that point nowhere: deployments to providers, models to deployments, features to models."""
    for name, deployment in policy.deployments.items():
        if deployment.provider not in policy.providers:
            yield PolicyIssue(
                f"deployments.{name}.provider",
                f"unknown provider {deployment.provider!r} (known: {_names(policy.providers)})",
            )
        if deployment.tier is Tier.PROVISIONED and deployment.capacity is None:
            yield PolicyIssue(f"deployments.{name}.capacity", "required for tier provisioned")
    for model, deployment_names in policy.models.items():
        if not deployment_names:
            yield PolicyIssue(f"models.{model}", "must list at least one deployment")
        for index, deployment_name in enumerate(deployment_names):
            if deployment_name not in policy.deployments:
                yield PolicyIssue(
                    f"models.{model}[{index}]",
                    f"unknown deployment {deployment_name!r} (known: {_names(policy.deployments)})",
                )
    for feature_name, feature in policy.features.items():
        for r, route in enumerate(feature.routes):
            for m, model in enumerate(route.models):
                if model not in policy.models:
                    yield PolicyIssue(
                        f"features.{feature_name}.routes[{r}].models[{m}]",
                        f"unknown model {model!r} (known: {_names(policy.models)})",
                    )
    for key, api_key in policy.api_keys.items():
        for index, feature_name in enumerate(api_key.features):
            if feature_name not in policy.features:
                yield PolicyIssue(f"api_keys.{key}.features[{index}]", f"unknown feature {feature_name!r}")


def _names(mapping: Mapping[str, object]) -> str:
    return ", ".join(sorted(mapping)) or "none"


def _schema_issues(exc: ValidationError) -> list[PolicyIssue]:
    errors = exc.errors()
    # pydantic drops a list item that failed and may then also report the list as too short: say it once.
    failed_inside = {error["loc"][:-1] for error in errors if len(error["loc"]) > 1}
    failed_inside |= {loc[:i] for loc in failed_inside for i in range(len(loc))}
    return [
        _issue_from(error)
        for error in errors
        if not (error["type"] == "too_short" and error["loc"] in failed_inside)
    ]


def _issue_from(error: ErrorDetails) -> PolicyIssue:
    path = _path(error["loc"])
    message = _message(error)
    # Model validators report "field: reason" for the field they are about; move it into the path.
    if error["type"] == "value_error" and ": " in message and " " not in message.split(": ", 1)[0]:
        field, message = message.split(": ", 1)
        path = f"{path}.{field}" if path else field
    return PolicyIssue(path or "<document>", message)


def _path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


_MESSAGES: dict[str, str] = {
    "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "missing": "required",
    "extra_forbidden": "unknown field",
    "enum": "must be one of {expected}",
    "too_short": "must have at least {min_length} item(s)",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "string_type": "must be a string",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "tuple_type": "must be a list",
    "bool_type": "must be a boolean",
}


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _message(error: ErrorDetails) -> str:
    template = _MESSAGES.get(error["type"])
    if template is not None:
        try:
            return template.format(**{key: _plain(value) for key, value in error.get("ctx", {}).items()})
        except KeyError:
            pass
    message = error["msg"]
    return message.removeprefix("Value error, ")
