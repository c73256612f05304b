"""How each served kind's lists merge: the `patchStrategy` and `patchMergeKey` tags of the upstream Go types
(k8s.io/api), which strategic merge patches and server-side apply follow. A list not named here is replaced
whole (atomic)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Field:
    """One field's merge behaviour: a list merged by `merge_key` (or, with `merge` and no key, a list of
    scalars merged as a set), `retain_keys` for union types, and the schema of its children."""

    merge_key: str = ""
    merge: bool = False
    retain_keys: bool = False
    children: Schema | None = None
    free_map: bool = False
    """A map with arbitrary keys (labels, resource lists), owned as a whole as well as per key."""


Schema = dict[str, Field]

_FREE_MAP: Final = Field(free_map=True)

META: Final[Schema] = {
    "labels": _FREE_MAP,
    "annotations": _FREE_MAP,
    "ownerReferences": Field(merge_key="uid", merge=True),
    "finalizers": Field(merge=True),
}

_RESOURCES: Final[Schema] = {"limits": _FREE_MAP, "requests": _FREE_MAP}

CONTAINER: Final[Schema] = {
    "ports": Field(merge_key="containerPort", merge=True),
    "env": Field(merge_key="name", merge=True),
    "volumeMounts": Field(merge_key="mountPath", merge=True),
    "volumeDevices": Field(merge_key="devicePath", merge=True),
    "resources": Field(children=_RESOURCES),
}

POD_SPEC: Final[Schema] = {
    "containers": Field(merge_key="name", merge=True, children=CONTAINER),
    "initContainers": Field(merge_key="name", merge=True, children=CONTAINER),
    "ephemeralContainers": Field(merge_key="name", merge=True, children=CONTAINER),
    "volumes": Field(merge_key="name", merge=True, retain_keys=True),
    "imagePullSecrets": Field(merge_key="name", merge=True),
    "hostAliases": Field(merge_key="ip", merge=True),
    "topologySpreadConstraints": Field(merge_key="topologyKey", merge=True),
    "schedulingGates": Field(merge_key="name", merge=True),
    "resourceClaims": Field(merge_key="name", merge=True, retain_keys=True),
    "nodeSelector": _FREE_MAP,
    "overhead": _FREE_MAP,
}

_CONDITIONS: Final = Field(merge_key="type", merge=True)

POD: Final[Schema] = {
    "metadata": Field(children=META),
    "spec": Field(children=POD_SPEC),
    "status": Field(
        children={
            "conditions": _CONDITIONS,
            "podIPs": Field(merge_key="ip", merge=True),
            "hostIPs": Field(merge_key="ip", merge=True),
            "resourceClaimStatuses": Field(merge_key="name", merge=True, retain_keys=True),
        }
    ),
}

_TEMPLATE: Final = Field(children={"metadata": Field(children=META), "spec": Field(children=POD_SPEC)})

SCHEMAS: Final[dict[str, Schema]] = {
    "Pod": POD,
    "Job": {
        "metadata": Field(children=META),
        "spec": Field(
            children={"template": _TEMPLATE, "selector": Field(children={"matchLabels": _FREE_MAP})}
        ),
        "status": Field(children={"conditions": _CONDITIONS}),
    },
    "Node": {
        "metadata": Field(children=META),
        # NodeSpec.taints carries no patch tags upstream: a patch replaces the whole list.
        "spec": Field(children={"podCIDRs": Field(merge=True)}),
        "status": Field(
            children={
                "conditions": _CONDITIONS,
                "addresses": Field(merge_key="type", merge=True),
                "capacity": _FREE_MAP,
                "allocatable": _FREE_MAP,
            }
        ),
    },
    "Namespace": {"metadata": Field(children=META), "status": Field(children={"conditions": _CONDITIONS})},
}

DEFAULT: Final[Schema] = {"metadata": Field(children=META)}


def schema_of(kind: str) -> Schema:
    """The merge schema of a kind; kinds without tagged lists merge only their metadata's lists."""
    return SCHEMAS.get(kind, DEFAULT)


def child(schema: Schema | None, name: str) -> Field | None:
    return schema.get(name) if schema else None


def children_of(spec: Field | None) -> Schema | None:
    return spec.children if spec else None
