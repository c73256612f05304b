"""OpenAPI schemas of the served kinds, under upstream's definition names (`io.k8s.api.core.v1.Pod`), so that
`kubectl explain` and strategic merge patches read them as they read kube-apiserver's.

A schema lists the fields a model declares and the upstream fields it passes through (PASSED_THROUGH), with
upstream's list semantics (`x-kubernetes-list-type`, patch merge keys). Objects never say
`additionalProperties: true`: the models keep unknown fields only to report them, as the API server does.
Refs are OpenAPI v2's (`#/definitions/...`); `openapi.py` rewrites them for v3."""

from __future__ import annotations

import types
from typing import Annotated, Any, Final, Union, get_args, get_origin

from pydantic.fields import FieldInfo

from libs.api.models import (
    CompositePodGroup,
    Job,
    Node,
    Pod,
    PodGroup,
    PriorityClass,
    Workload,
    scheduling,
    v1beta1,
)
from libs.api.models.base import PODWAY_STATUS, ApiModel, Quantity, Timestamp
from libs.api.models.core import LegacyWorkloadReference
from libs.api.models.kueue import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from libs.api.models.legacy import LegacyPodGroup, LegacyWorkload, LegacyWorkloadSpec
from libs.api.models.meta import ApiObject
from libs.api.models.resource import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from libs.kubeapi import models
from libs.kubeapi.resources import RESOURCES, Resource

Schema = dict[str, Any]

META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1"
QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
TIME: Final = f"{META}.Time"
MICRO_TIME: Final = f"{META}.MicroTime"

MODELS: Final[dict[tuple[str, str, str], type[ApiObject]]] = {
    ("", "v1", "Namespace"): models.Namespace,
    ("authentication.k8s.io", "v1", "SelfSubjectReview"): models.SelfSubjectReview,
    ("", "v1", "Pod"): Pod,
    ("", "v1", "Node"): Node,
    ("", "v1", "Event"): models.CoreEvent,
    ("events.k8s.io", "v1", "Event"): models.Event,
    ("batch", "v1", "Job"): Job,
    ("scheduling.k8s.io", "v1", "PriorityClass"): PriorityClass,
    ("scheduling.k8s.io", "v1alpha1", "Workload"): LegacyWorkload,
    ("scheduling.k8s.io", "v1alpha2", "Workload"): Workload,
    ("scheduling.k8s.io", "v1alpha2", "PodGroup"): PodGroup,
    ("scheduling.k8s.io", "v1beta1", "Workload"): v1beta1.BetaWorkload,
    ("scheduling.k8s.io", "v1beta1", "PodGroup"): v1beta1.BetaPodGroup,
    ("scheduling.k8s.io", "v1alpha3", "Workload"): v1beta1.AlphaThreeWorkload,
    ("scheduling.k8s.io", "v1alpha3", "PodGroup"): v1beta1.AlphaThreePodGroup,
    ("scheduling.k8s.io", "v1alpha3", "CompositePodGroup"): CompositePodGroup,
    ("resource.k8s.io", "v1", "DeviceClass"): DeviceClass,
    ("resource.k8s.io", "v1", "ResourceClaim"): ResourceClaim,
    ("resource.k8s.io", "v1", "ResourceClaimTemplate"): ResourceClaimTemplate,
    ("resource.k8s.io", "v1", "ResourceSlice"): ResourceSlice,
    ("kueue.x-k8s.io", "v1beta2", "ResourceFlavor"): ResourceFlavor,
    ("kueue.x-k8s.io", "v1beta2", "Cohort"): Cohort,
    ("kueue.x-k8s.io", "v1beta2", "ClusterQueue"): ClusterQueue,
    ("kueue.x-k8s.io", "v1beta2", "LocalQueue"): LocalQueue,
}
"""The model of each served (group, version, kind)."""

_PACKAGES: Final = {
    "libs.api.models.core": "io.k8s.api.core.v1",
    "libs.api.models.batch": "io.k8s.api.batch.v1",
    "libs.api.models.scheduling": "io.k8s.api.scheduling.v1alpha2",
    "libs.api.models.resource": "io.k8s.api.resource.v1",
    "libs.api.models.meta": META,
    # A CRD's definitions are named by its group reversed, as kube-apiserver publishes them.
    "libs.api.models.kueue": "io.x-k8s.kueue.v1beta2",
}
# Models whose upstream name is not their module's package and class name.
_NAMES: Final[dict[type[ApiModel], str]] = {
    PriorityClass: "io.k8s.api.scheduling.v1.PriorityClass",
    LegacyWorkloadReference: "io.k8s.api.core.v1.WorkloadReference",
    LegacyWorkload: "io.k8s.api.scheduling.v1alpha1.Workload",
    LegacyWorkloadSpec: "io.k8s.api.scheduling.v1alpha1.WorkloadSpec",
    LegacyPodGroup: "io.k8s.api.scheduling.v1alpha1.PodGroup",
    v1beta1.BetaWorkload: "io.k8s.api.scheduling.v1beta1.Workload",
    v1beta1.BetaWorkloadSpec: "io.k8s.api.scheduling.v1beta1.WorkloadSpec",
    v1beta1.BetaPodGroupTemplate: "io.k8s.api.scheduling.v1beta1.PodGroupTemplate",
    v1beta1.BetaPodGroup: "io.k8s.api.scheduling.v1beta1.PodGroup",
    v1beta1.BetaPodGroupSpec: "io.k8s.api.scheduling.v1beta1.PodGroupSpec",
    v1beta1.DisruptionMode: "io.k8s.api.scheduling.v1beta1.DisruptionMode",
    scheduling.WorkloadReference: "io.k8s.api.scheduling.v1beta1.WorkloadReference",
    v1beta1.AlphaThreeWorkload: "io.k8s.api.scheduling.v1alpha3.Workload",
    v1beta1.AlphaThreePodGroup: "io.k8s.api.scheduling.v1alpha3.PodGroup",
    v1beta1.BetaCompositePodGroupTemplate: "io.k8s.api.scheduling.v1beta1.CompositePodGroupTemplate",
    **{
        model: f"io.k8s.api.scheduling.v1alpha3.{model.__name__}"
        for model in (
            scheduling.CompositePodGroup,
            scheduling.CompositePodGroupSpec,
            scheduling.CompositePodGroupStatus,
            scheduling.CompositePodGroupTemplate,
            scheduling.CompositePodGroupSchedulingPolicy,
            scheduling.CompositeGangSchedulingPolicy,
            scheduling.CompositeDisruptionMode,
        )
    },
    models.Namespace: "io.k8s.api.core.v1.Namespace",
    models.SelfSubjectReview: "io.k8s.api.authentication.v1.SelfSubjectReview",
    models.SelfSubjectReviewStatus: "io.k8s.api.authentication.v1.SelfSubjectReviewStatus",
    models.UserInfo: "io.k8s.api.authentication.v1.UserInfo",
    models.NamespaceSpec: "io.k8s.api.core.v1.NamespaceSpec",
    models.NamespaceStatus: "io.k8s.api.core.v1.NamespaceStatus",
    models.ObjectReference: "io.k8s.api.core.v1.ObjectReference",
    models.EventSource: "io.k8s.api.core.v1.EventSource",
    models.EventSeries: "io.k8s.api.core.v1.EventSeries",
    models.CoreEvent: "io.k8s.api.core.v1.Event",
    models.Event: "io.k8s.api.events.v1.Event",
}

_TOP_LEVEL: Final = {
    "apiVersion": "APIVersion defines the versioned schema of this representation of an object. Servers "
    "should convert recognized schemas to the latest internal value, and may reject unrecognized values.",
    "kind": "Kind is a string value representing the REST resource this object represents. Servers may "
    "infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase.",
    "metadata": "Standard object's metadata.",
    "spec": "Spec defines the behavior of the object.",
    "status": "Status is the most recently observed status of the object. Populated by the system. "
    "Read-only.",
}
# Integers upstream declares as int64; the others are int32.
_INT64: Final = frozenset(
    {"generation", "observedGeneration", "activeDeadlineSeconds", "terminationGracePeriodSeconds"}
    | {"tolerationSeconds", "deletionGracePeriodSeconds", "ttlSecondsAfterFinished", "resourceSliceCount"}
)
_MICRO_TIME_FIELDS: Final = frozenset({"eventTime", "lastObservedTime"})
_TIMESTAMP_VALIDATOR: Final = get_args(Timestamp)[1]


def definition_name(model: type[ApiModel]) -> str:
    """The upstream definition name of a model (`io.k8s.api.core.v1.PodSpec`)."""
    return _NAMES.get(model) or f"{_PACKAGES[model.__module__]}.{model.__name__}"


def ref(name: str) -> Schema:
    return {"$ref": f"#/definitions/{name}"}


def kind_definitions() -> dict[str, Schema]:
    """Every served kind's schema, its list's, and every schema they refer to, by definition name."""
    definitions: dict[str, Schema] = dict(_meta_definitions())
    for (group, version, kind), model in MODELS.items():
        _add_model(model, definitions)
        definitions[definition_name(model)]["x-kubernetes-group-version-kind"] = [_gvk(group, version, kind)]
    for resource in RESOURCES:
        name = definition_name(MODELS[resource.group, resource.version, resource.kind])
        definitions[list_definition_name(resource)] = _list_schema(resource, name)
    return definitions


def kind_definition_name(resource: Resource) -> str:
    return definition_name(MODELS[resource.group, resource.version, resource.kind])


def list_definition_name(resource: Resource) -> str:
    return f"{kind_definition_name(resource)}List"


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def _add_model(model: type[ApiModel], definitions: dict[str, Schema]) -> None:
    name = definition_name(model)
    if name in definitions:
        return
    schema: Schema = {"description": _doc(model), "type": "object"}
    definitions[name] = schema
    properties = {
        field.alias or key: _field_schema(name, field.alias or key, field, definitions)
        for key, field in model.model_fields.items()
    }
    for passed in model.PASSED_THROUGH:
        properties[passed] = _passed_through(passed)
    if issubclass(model, ApiObject):
        for field, description in _TOP_LEVEL.items():
            if field in properties:
                properties[field] = {**properties[field], "description": description}
    schema["properties"] = dict(sorted(properties.items()))


def _doc(model: type[ApiModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def _field_schema(owner: str, field: str, info: FieldInfo, definitions: dict[str, Schema]) -> Schema:
    if _TIMESTAMP_VALIDATOR in info.metadata:
        return ref(MICRO_TIME if field in _MICRO_TIME_FIELDS else TIME)
    schema = _type_schema(info.annotation, field, definitions)
    if schema.get("type") == "array":
        schema |= _LIST_SEMANTICS.get((owner.rpartition(".")[2], field), _ATOMIC)
    return schema


def _type_schema(annotation: Any, field: str, definitions: dict[str, Schema]) -> Schema:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        present = [arg for arg in args if arg is not type(None)]
        return _type_schema(present[0], field, definitions) if len(present) == 1 else _OPAQUE
    if annotation == Timestamp:
        return ref(MICRO_TIME if field in _MICRO_TIME_FIELDS else TIME)
    if annotation == Quantity:
        return ref(QUANTITY)
    if origin is Annotated:
        return _type_schema(args[0], field, definitions)
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0], field, definitions)}
    if origin is dict:
        if args[1] is Any:
            return dict(_OPAQUE)
        return {"type": "object", "additionalProperties": _type_schema(args[1], field, definitions)}
    if isinstance(annotation, type) and issubclass(annotation, ApiModel):
        _add_model(annotation, definitions)
        return ref(definition_name(annotation))
    return _scalar(annotation, field)


def _scalar(annotation: Any, field: str) -> Schema:
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer", "format": "int64" if field in _INT64 else "int32"}
    if annotation is float:
        return {"type": "number", "format": "double"}
    if annotation is str:
        return {"type": "string"}
    return dict(_OPAQUE)


_OPAQUE: Final[Schema] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
"""A value Podway does not describe field by field (opaque driver config, a passed-through block)."""

_ATOMIC: Final[Schema] = {"x-kubernetes-list-type": "atomic"}


def _map_list(*keys: str, strategy: str = "merge", merge_key: str = "") -> Schema:
    """A list merged by key, as upstream's `patchStrategy:"merge" listType=map`."""
    return {
        "x-kubernetes-list-map-keys": list(keys),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": merge_key or keys[0],
        "x-kubernetes-patch-strategy": strategy,
    }


def _keyed_atomic(key: str) -> Schema:
    return {
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-patch-merge-key": key,
        "x-kubernetes-patch-strategy": "merge",
    }


# Upstream's list semantics by (schema, field); any other list is atomic.
_LIST_SEMANTICS: Final[dict[tuple[str, str], Schema]] = {
    ("PodSpec", "containers"): _map_list("name"),
    ("PodSpec", "initContainers"): _map_list("name"),
    ("PodSpec", "ephemeralContainers"): _map_list("name"),
    ("PodSpec", "volumes"): _map_list("name", strategy="merge,retainKeys"),
    ("PodSpec", "resourceClaims"): _map_list("name", strategy="merge,retainKeys"),
    ("PodSpec", "imagePullSecrets"): _map_list("name"),
    ("PodSpec", "hostAliases"): _map_list("ip"),
    ("PodSpec", "schedulingGates"): _map_list("name"),
    ("PodSpec", "topologySpreadConstraints"): _map_list("topologyKey", "whenUnsatisfiable"),
    ("Container", "env"): _map_list("name"),
    ("Container", "ports"): _map_list("containerPort", "protocol"),
    ("Container", "volumeMounts"): _map_list("mountPath"),
    ("Container", "volumeDevices"): _map_list("devicePath"),
    ("ResourceRequirements", "claims"): {
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-list-type": "map",
    },
    ("PodStatus", "conditions"): _map_list("type"),
    ("PodStatus", "podIPs"): _map_list("ip"),
    ("PodStatus", "hostIPs"): _map_list("ip"),
    ("PodStatus", "resourceClaimStatuses"): _map_list("name", strategy="merge,retainKeys"),
    ("NodeStatus", "conditions"): _map_list("type"),
    ("NodeStatus", "addresses"): _map_list("type"),
    ("JobStatus", "conditions"): _keyed_atomic("type"),
    ("ObjectMeta", "ownerReferences"): _map_list("uid"),
    ("ObjectMeta", "finalizers"): {"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
    ("PodGroupStatus", "conditions"): _map_list("type"),
    ("PodGroupStatus", "resourceClaimStatuses"): _map_list("name"),
    ("PodGroupSpec", "resourceClaims"): _map_list("name"),
    ("WorkloadSpec", "podGroupTemplates"): {
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-list-type": "map",
    },
    ("NamespaceSpec", "finalizers"): {"x-kubernetes-list-type": "atomic"},
}

_STRING: Final[Schema] = {"type": "string"}
_BOOLEAN: Final[Schema] = {"type": "boolean"}
_STRINGS: Final[Schema] = {"type": "array", "items": _STRING, "x-kubernetes-list-type": "atomic"}


def _integer(format_: str = "int32") -> Schema:
    return {"type": "integer", "format": format_}


def _objects(semantics: Schema, *keys: str, **nested: Schema) -> Schema:
    """A passed-through list of objects: its merge keys (and the nested blocks manifests commonly set) are
    named so that strategic merge patches can walk it; anything else in an element is kept as given."""
    properties = {key: _STRING for key in keys} | nested
    item: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if properties:
        item["properties"] = properties
    return {"type": "array", "items": item} | semantics


# The fields models pass through, by wire name; a field not listed is an opaque object.
_PASSED: Final[dict[str, Schema]] = {
    **dict.fromkeys(
        [
            "hostIPC",
            "hostNetwork",
            "hostPID",
            "hostUsers",
            "setHostnameAsFQDN",
            "shareProcessNamespace",
            "stdin",
            "stdinOnce",
            "tty",
            "automountServiceAccountToken",
            "enableServiceLinks",
            "manualSelector",
            "allNodes",
            "adminAccess",
            "bindsToNode",
            "perDeviceNodeSelection",
        ],
        _BOOLEAN,
    ),
    **dict.fromkeys(
        [
            "dnsPolicy",
            "hostname",
            "hostnameOverride",
            "runtimeClassName",
            "serviceAccount",
            "serviceAccountName",
            "subdomain",
            "imagePullPolicy",
            "restartPolicy",
            "terminationMessagePath",
            "terminationMessagePolicy",
            "workingDir",
            "managedBy",
            "podReplacementPolicy",
            "completedIndexes",
            "failedIndexes",
            "selfLink",
            "hostIP",
            "podIP",
            "message",
            "reason",
            "qosClass",
            "resize",
            "phase",
            "externalID",
            "podCIDR",
            "providerID",
            "nodeName",
        ],
        _STRING,
    ),
    **dict.fromkeys(
        ("args", "command", "podCIDRs", "bindingConditions", "bindingFailureConditions"), _STRINGS
    ),
    **dict.fromkeys(("lastProbeTime", "lastTransitionTime"), ref(TIME)),
    "activeDeadlineSeconds": _integer("int64"),
    "terminationGracePeriodSeconds": _integer("int64"),
    "deletionGracePeriodSeconds": _integer("int64"),
    "ttlSecondsAfterFinished": _integer(),
    "backoffLimitPerIndex": _integer(),
    "maxFailedIndexes": _integer(),
    "terminating": _integer(),
    "observedGeneration": _integer("int64"),
    "env": _objects(_map_list("name"), "name", "value", valueFrom=_OPAQUE),
    "envFrom": _objects(_ATOMIC),
    "ports": _objects(_map_list("containerPort", "protocol"), "name", "protocol", containerPort=_integer()),
    "volumeMounts": _objects(_map_list("mountPath"), "name", "mountPath"),
    "volumeDevices": _objects(_map_list("devicePath"), "name", "devicePath"),
    "volumes": _objects(_map_list("name", strategy="merge,retainKeys"), "name"),
    "imagePullSecrets": _objects(_map_list("name"), "name"),
    "hostAliases": _objects(_map_list("ip"), "ip"),
    "schedulingGates": _objects(_map_list("name"), "name"),
    "topologySpreadConstraints": _objects(
        _map_list("topologyKey", "whenUnsatisfiable"),
        "topologyKey",
        "whenUnsatisfiable",
        labelSelector=_OPAQUE,
    ),
    "ephemeralContainers": _objects(_map_list("name"), "name"),
    "conditions": _objects(_map_list("type"), "type"),
    "addresses": _objects(_map_list("type"), "type"),
    "podIPs": _objects(_map_list("ip"), "ip"),
    "hostIPs": _objects(_map_list("ip"), "ip"),
    "resourceClaimStatuses": _objects(_map_list("name", strategy="merge,retainKeys"), "name"),
    "managedFields": {"type": "array", "items": ref(f"{META}.ManagedFieldsEntry")} | _ATOMIC,
    "nodeSelector": ref("io.k8s.api.core.v1.NodeSelector"),
    "resources": ref("io.k8s.api.core.v1.ResourceRequirements"),
    **dict.fromkeys(
        [
            "readinessGates",
            "containerStatuses",
            "initContainerStatuses",
            "ephemeralContainerStatuses",
            "images",
            "volumesAttached",
            "volumesInUse",
            "resizePolicy",
            "restartPolicyRules",
            "consumesCounters",
            "sharedCounters",
            "taints",
            "tolerations",
            "config",
            "devices",
            "runtimeHandlers",
        ],
        _objects(_ATOMIC),
    ),
    PODWAY_STATUS: _OPAQUE
    | {"description": "What Podway's controllers record where upstream has no field (read-only)."},
}


def _passed_through(field: str) -> Schema:
    return dict(_PASSED.get(field, _OPAQUE))


def _list_schema(resource: Resource, item_name: str) -> Schema:
    return {
        "description": f"{resource.list_kind_name} is a list of {resource.kind} objects.",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": _TOP_LEVEL["apiVersion"]},
            "items": {"type": "array", "items": ref(item_name), "description": f"List of {resource.plural}."},
            "kind": {"type": "string", "description": _TOP_LEVEL["kind"]},
            "metadata": ref(f"{META}.ListMeta") | {"description": "Standard list metadata."},
        },
        "x-kubernetes-group-version-kind": [_gvk(resource.group, resource.version, resource.list_kind_name)],
    }


def _object(description: str, properties: dict[str, Schema], **extra: Any) -> Schema:
    return {"description": description, "type": "object", "properties": properties, **extra}


def _every_version(kind: str) -> list[dict[str, str]]:
    # DeleteOptions and WatchEvent are registered in every group version, as upstream lists them.
    versions = dict.fromkeys((r.group, r.version) for r in RESOURCES)
    return [_gvk(group, version, kind) for group, version in versions]


def _meta_definitions() -> dict[str, Schema]:
    """The apimachinery types requests and answers use: times, quantities, list metadata, Status,
    DeleteOptions, WatchEvent, Patch, and the Eviction pods/eviction takes."""
    status_details = _object(
        "Extended data associated with the reason of a Status.",
        {
            "causes": {
                "type": "array",
                "items": ref(f"{META}.StatusCause"),
                "x-kubernetes-list-type": "atomic",
            },
            "group": _STRING,
            "kind": _STRING,
            "name": _STRING,
            "retryAfterSeconds": _integer(),
            "uid": _STRING,
        },
    )
    return {
        QUANTITY: {"description": "A fixed-point number: `1`, `500m`, `16Gi`.", "type": "string"},
        TIME: {"description": "An RFC 3339 time, in seconds.", "type": "string", "format": "date-time"},
        MICRO_TIME: {
            "description": "An RFC 3339 time, in microseconds.",
            "type": "string",
            "format": "date-time",
        },
        f"{META}.FieldsV1": {"description": "The set of fields a manager owns.", "type": "object"},
        f"{META}.ManagedFieldsEntry": _object(
            "The workflow that manages a set of fields, and the fields it manages.",
            {
                "apiVersion": _STRING,
                "fieldsType": _STRING,
                "fieldsV1": ref(f"{META}.FieldsV1"),
                "manager": _STRING,
                "operation": _STRING,
                "subresource": _STRING,
                "time": ref(TIME),
            },
        ),
        f"{META}.ListMeta": _object(
            "Metadata of a list: its resourceVersion and the token to continue it.",
            {
                "continue": _STRING,
                "remainingItemCount": _integer("int64"),
                "resourceVersion": _STRING,
                "selfLink": _STRING,
            },
        ),
        f"{META}.StatusCause": _object(
            "One cause of a failure: the field and why.",
            {"field": _STRING, "message": _STRING, "reason": _STRING},
        ),
        f"{META}.StatusDetails": status_details,
        f"{META}.Status": _object(
            "The answer to a call that returns no object, or the reason a call failed.",
            {
                "apiVersion": _STRING,
                "code": _integer(),
                "details": ref(f"{META}.StatusDetails"),
                "kind": _STRING,
                "message": _STRING,
                "metadata": ref(f"{META}.ListMeta"),
                "reason": _STRING,
                "status": _STRING,
            },
            **{"x-kubernetes-group-version-kind": [_gvk("", "v1", "Status")]},
        ),
        f"{META}.Preconditions": _object(
            "What must hold before a deletion is carried out.", {"resourceVersion": _STRING, "uid": _STRING}
        ),
        f"{META}.DeleteOptions": _object(
            "Options of a deletion.",
            {
                "apiVersion": _STRING,
                "dryRun": _STRINGS,
                "gracePeriodSeconds": _integer("int64"),
                "ignoreStoreReadErrorWithClusterBreakingPotential": _BOOLEAN,
                "kind": _STRING,
                "orphanDependents": _BOOLEAN,
                "preconditions": ref(f"{META}.Preconditions"),
                "propagationPolicy": _STRING,
            },
            **{"x-kubernetes-group-version-kind": _every_version("DeleteOptions")},
        ),
        "io.k8s.apimachinery.pkg.runtime.RawExtension": {
            "description": "An embedded object, in its own apiVersion and kind.",
            "type": "object",
        },
        f"{META}.WatchEvent": _object(
            "One event of a watch: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and the object.",
            {"object": ref("io.k8s.apimachinery.pkg.runtime.RawExtension"), "type": _STRING},
            required=["type", "object"],
            **{"x-kubernetes-group-version-kind": _every_version("WatchEvent")},
        ),
        f"{META}.Patch": {
            "description": "A patch: JSON patch, merge patch, strategic merge patch or apply configuration.",
            "type": "object",
        },
        "io.k8s.api.policy.v1.Eviction": _object(
            "Evicts a pod from its node, subject to the pod's disruption rules.",
            {
                "apiVersion": _STRING,
                "deleteOptions": ref(f"{META}.DeleteOptions"),
                "kind": _STRING,
                "metadata": ref(f"{META}.ObjectMeta"),
            },
            **{"x-kubernetes-group-version-kind": [_gvk("policy", "v1", "Eviction")]},
        ),
    }
