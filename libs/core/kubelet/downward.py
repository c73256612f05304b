"""A container's environment as kubelet builds it: literal values with `$(VAR)` references expanded, the
downward API's `fieldRef` and `resourceFieldRef`, and what a Job or a gang adds."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from libs.api.quantity import QuantityError, parse_quantity

_SUBSCRIPTED = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
RESOURCES = (
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
)


class EnvError(Exception):
    """A variable kubelet could not make; the container fails with `CreateContainerConfigError`."""


@dataclass(frozen=True, slots=True)
class PodPlace:
    """What only the node knows: where the pod runs and its address."""

    node_name: str
    pod_ip: str
    host_ip: str
    node_allocatable: Mapping[str, str]


def field_value(pod: Mapping[str, Any], path: str, place: PodPlace) -> str:
    """A `fieldRef.fieldPath` kubelet supports, or EnvError with kubelet's message."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    subscripted = _SUBSCRIPTED.match(path)
    if subscripted:
        return str((metadata.get(subscripted.group(1)) or {}).get(subscripted.group(2), ""))
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.nodeName": place.node_name,
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": place.pod_ip,
        "status.podIPs": place.pod_ip,
        "status.hostIP": place.host_ip,
        "status.hostIPs": place.host_ip,
    }
    if path not in simple:
        raise EnvError(f'error converting fieldPath: field label not supported: "{path}"')
    return str(simple[path] or "")


def resource_value(container: Mapping[str, Any], ref: Mapping[str, Any], place: PodPlace) -> str:
    """A `resourceFieldRef`: the container's limit (the node's allocatable when it sets none) or request,
    divided by `divisor` and rounded up, as kubelet rounds."""
    resource = str(ref.get("resource") or "")
    if resource not in RESOURCES:
        raise EnvError(f"unsupported container resource : {resource!r}")
    kind, name = resource.split(".", 1)
    amounts = (container.get("resources") or {}).get(kind) or {}
    text = amounts.get(name)
    if text is None and kind == "limits":
        text = place.node_allocatable.get(name)
    if text is None:
        return "0"
    try:
        divisor = parse_quantity(str(ref.get("divisor") or "1"))
        amount = parse_quantity(str(text))
    except QuantityError as error:
        raise EnvError(f"invalid quantity for {resource}: {error}") from error
    if divisor <= 0:
        raise EnvError(f"invalid divisor for {resource}: must be greater than 0")
    return str(max(1, math.ceil(amount / divisor)) if amount > Decimal(0) else 0)


def expand(text: str, env: Mapping[str, str]) -> str:
    """`$(VAR)` replaced by VAR's value when defined (left as written otherwise), `$$` by `$`."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _REFERENCE.sub(substitute, text)


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    place: PodPlace,
    base: Mapping[str, str],
) -> dict[str, str]:
    """`base` (what the agent adds) then the container's `env` in order, each value able to refer to the
    ones before it. Raises EnvError for a reference kubelet could not resolve."""
    env = dict(base)
    for index, var in enumerate(container.get("env") or []):
        name = str(var.get("name") or "")
        source = var.get("valueFrom")
        if source is None:
            env[name] = expand(str(var.get("value") or ""), env)
        elif "fieldRef" in source:
            env[name] = field_value(pod, str(source["fieldRef"].get("fieldPath") or ""), place)
        elif "resourceFieldRef" in source:
            ref = source["resourceFieldRef"]
            env[name] = resource_value(_named(pod, ref.get("containerName"), container), ref, place)
        else:
            kind = next(iter(source), "valueFrom")
            raise EnvError(f"env[{index}] {name}: {kind} is not supported by the process runtime")
    return env


def _named(pod: Mapping[str, Any], name: Any, default: Mapping[str, Any]) -> Mapping[str, Any]:
    if not name:
        return default
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if container.get("name") == name:
            return dict(container)
    raise EnvError(f"container {name!r} not found in the pod")


def command_line(container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """`command` + `args` with `$(VAR)` expanded; empty when the container names neither (the image's
    entrypoint, which the process runtime does not have)."""
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    return [expand(str(word), env) for word in words]
