"""How many devices of each DeviceClass a pod asks for: through its own claims, and through extended
resources (`nvidia.com/gpu: 2`) served by the class whose `extendedResourceName` they are."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

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
    """Whole devices per DeviceClass that a pod's own claims ask for, so that a node without them is not
    chosen: claims made from a ResourceClaimTemplate (`templates` maps `namespace/name` to its spec) for this
    pod alone (a claim equal in name, claim name and template name to a PodGroup claim is the group's,
    shared), `ExactCount` requests of classes whose devices sit on nodes. Selectors and constraints are
    the DRA allocator's to honour."""
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
            ):
                wanted[device_class] = wanted.get(device_class, 0) + int(exactly.get("count") or 1)
    return wanted


def claim_identity(claim: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """A claim reference's (name, resourceClaimName, resourceClaimTemplateName): equal for a pod and its
    PodGroup means the claim is the group's, shared."""
    return (claim.get("name"), claim.get("resourceClaimName"), claim.get("resourceClaimTemplateName"))
