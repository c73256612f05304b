"""How many devices of each DeviceClass a pod asks for: through its own claims, and through extended
resources (`nvidia.com/gpu: 2`) served by the class whose `extendedResourceName` they are."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from .claims import ClaimRequest, ClaimSpec, DeviceAsk, claim_spec

EXTENDED_RESOURCES_CLAIM = "podway.io/extended-resources"
"""The claim a pod's extended resources (`nvidia.com/gpu: 2`) become when the pod also has claims, so that
one search chooses all its devices (upstream makes such a claim too); it is no ResourceClaim object."""
MISSING_TEMPLATE_CLASS = ""
"""The class a claim asks for when its template does not exist (yet): no device has it."""

NATIVE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


def extended_resource_devices(
    requests: Mapping[str, int], extended_resources: Mapping[str, str]
) -> dict[str, int]:
    """Devices per DeviceClass for a pod's extended resource requests: `nvidia.com/gpu: N` becomes N
    devices of the class serving it, or of a class named after the resource (which no node has) when no
    class serves it. Native resources and hugepages are not devices."""
    devices: dict[str, int] = {}
    for resource, amount in requests.items():
        if resource in NATIVE_RESOURCES or resource.startswith("hugepages-") or amount <= 0:
            continue
        device_class = extended_resources.get(resource, resource)
        devices[device_class] = devices.get(device_class, 0) + amount
    return devices


def claim_devices(
    namespace: str,
    pod_claims: Iterable[Mapping[str, Any]],
    group_claims: Iterable[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    node_classes: Container[str],
) -> dict[str, int]:
    """Whole devices per DeviceClass that a pod's own claims surely need, so that a node without them is
    passed over before any search: claims made from a ResourceClaimTemplate (`templates` maps
    `namespace/name` to its spec) for this pod alone (a claim equal in name, claim name and template name
    to a PodGroup claim is the group's, shared), `ExactCount` requests of whole devices of classes whose
    devices sit on nodes. Selectors, constraints and shares are the allocation search's to honour."""
    shared = {claim_identity(claim) for claim in group_claims}
    wanted: dict[str, int] = {}
    for claim in pod_claims:
        template_name = claim.get("resourceClaimTemplateName")
        if not template_name or claim_identity(claim) in shared:
            continue
        template = templates.get(f"{namespace}/{template_name}")
        requests = ((template.get("spec") or {}).get("devices") or {}).get("requests") if template else None
        for request in requests or []:
            exactly = request.get("exactly") or {}
            device_class = exactly.get("deviceClassName")
            if (
                isinstance(device_class, str)
                and device_class in node_classes
                and exactly.get("allocationMode", "ExactCount") == "ExactCount"
                and not (exactly.get("capacity") or {}).get("requests")
            ):
                wanted[device_class] = wanted.get(device_class, 0) + int(exactly.get("count") or 1)
    return wanted


def claim_identity(claim: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """A claim reference's (name, resourceClaimName, resourceClaimTemplateName): equal for a pod and its
    PodGroup means the claim is the group's, shared."""
    return (claim.get("name"), claim.get("resourceClaimName"), claim.get("resourceClaimTemplateName"))


NamedClaims = Callable[[str, str], ClaimSpec]
"""A claim the pod names (`resourceClaimName`) as the allocator reads it, from its name in the pod and the
ResourceClaim's name (see `named_claim_spec`)."""


def pod_claim_specs(
    namespace: str,
    pod_claims: Iterable[Mapping[str, Any]],
    group_claims: Iterable[Mapping[str, Any]],
    templates: Mapping[str, Mapping[str, Any]],
    named: NamedClaims | None = None,
) -> tuple[ClaimSpec, ...]:
    """The pod's own claims, keyed by their name in the pod (`gpus`): those made from templates, and (with
    `named`) the existing ResourceClaims it names. Claims shared with its PodGroup are the group's."""
    shared = {claim_identity(claim) for claim in group_claims}
    specs: list[ClaimSpec] = []
    for claim in pod_claims:
        if claim_identity(claim) in shared:
            continue
        if claim.get("resourceClaimTemplateName"):
            specs.append(_template_claim(namespace, claim, templates))
        elif claim.get("resourceClaimName") and named is not None:
            specs.append(named(str(claim.get("name") or ""), str(claim["resourceClaimName"])))
    return tuple(specs)


def named_claim_spec(
    name: str, claim_name: str, spec: Mapping[str, Any] | None, allocated: Sequence[str]
) -> ClaimSpec:
    """A ResourceClaim the pod names, as `name` in the pod: its `allocated` devices when it has some (the
    pod then takes nothing new), else its `spec` to allocate, else (it does not exist) a claim no device
    serves."""
    if allocated:
        return ClaimSpec(name, (), (), claim_name, tuple(sorted(allocated)))
    if spec is None:
        missing = DeviceAsk("missing-claim", MISSING_TEMPLATE_CLASS)
        return ClaimSpec(name, (ClaimRequest("missing-claim", (missing,)),), (), claim_name)
    return claim_spec(name, spec, resource_claim=claim_name)


def named_claims(
    pod_claims: Iterable[Mapping[str, Any]], group_claims: Iterable[Mapping[str, Any]]
) -> list[str]:
    """The existing ResourceClaims a pod names for itself (not through its PodGroup), in its order."""
    shared = {claim_identity(claim) for claim in group_claims}
    return [
        str(claim["resourceClaimName"])
        for claim in pod_claims
        if claim.get("resourceClaimName") and claim_identity(claim) not in shared
    ]


def group_claim_specs(
    namespace: str, group_claims: Iterable[Mapping[str, Any]], templates: Mapping[str, Mapping[str, Any]]
) -> tuple[ClaimSpec, ...]:
    """A PodGroup's own claims made from templates, keyed by their name in the PodGroup (`fabric`)."""
    return tuple(
        _template_claim(namespace, claim, templates)
        for claim in group_claims
        if claim.get("resourceClaimTemplateName")
    )


def extended_resources_claim(devices: Mapping[str, int]) -> ClaimSpec:
    """Whole devices per class for extended resources, as one claim of one request per class."""
    return ClaimSpec(
        EXTENDED_RESOURCES_CLAIM,
        tuple(
            ClaimRequest(device_class, (DeviceAsk(device_class, device_class, count=count),))
            for device_class, count in sorted(devices.items())
        ),
    )


def _template_claim(
    namespace: str, claim: Mapping[str, Any], templates: Mapping[str, Mapping[str, Any]]
) -> ClaimSpec:
    name = str(claim.get("name") or "")
    template = templates.get(f"{namespace}/{claim.get('resourceClaimTemplateName')}")
    if template is None:
        missing = DeviceAsk("missing-template", MISSING_TEMPLATE_CLASS)
        return ClaimSpec(name, (ClaimRequest("missing-template", (missing,)),))
    return claim_spec(name, template.get("spec") or {})
