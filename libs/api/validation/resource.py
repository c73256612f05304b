"""Validation of `resource.k8s.io/v1`: DeviceClass, ResourceClaim(Template) device requests, ResourceSlice."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from libs.api.device_selectors import selector_errors
from libs.api.errors import (
    FieldError,
    FieldPath,
    duplicate,
    invalid,
    not_supported,
    required,
    too_many,
)
from libs.api.formats import (
    c_identifier_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_key_errors,
    max_len_error,
)
from libs.api.models.resource import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    ALLOCATION_MODES,
    DEVICE_CONSTRAINTS_MAX,
    DEVICE_REQUESTS_MAX,
    DEVICE_SELECTORS_MAX,
    FIRST_AVAILABLE_MAX,
    RESOURCE_SLICE_MAX_DEVICES,
    Device,
    DeviceAttribute,
    DeviceClaim,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
)
from libs.api.quantity import quantity_error
from libs.api.validation.common import check_required_format, check_unique_names
from libs.api.validation.meta import validate_object_meta

SPEC: Final = FieldPath("spec")
DRIVER_NAME_MAX_LENGTH: Final = 63
ATTRIBUTE_NAME_MAX_LENGTH: Final = 32

Item = TypeVar("Item")


def validate_device_class(device_class: DeviceClass) -> list[FieldError]:
    """Metadata, CEL selectors and extended resource name of a DeviceClass."""
    errors = validate_object_meta(device_class.metadata, namespaced=False)
    errors += _validate_selectors(device_class.spec.selectors, SPEC.child("selectors"))
    name = device_class.spec.extended_resource_name
    if name:
        errors += _validate_extended_resource_name(name, SPEC.child("extendedResourceName"))
    return errors


def _validate_extended_resource_name(name: str, path: FieldPath) -> list[FieldError]:
    errors = [invalid(path, name, message) for message in label_key_errors(name)]
    domain = name.partition("/")[0] if "/" in name else ""
    if not domain or domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        errors.append(
            invalid(path, name, "must be an extended resource name (a domain outside kubernetes.io)")
        )
    return errors


def validate_resource_claim(claim: ResourceClaim) -> list[FieldError]:
    """Metadata and device requests of a ResourceClaim."""
    errors = validate_object_meta(claim.metadata, namespaced=True)
    return errors + validate_resource_claim_spec(claim.spec, SPEC)


def validate_resource_claim_template(template: ResourceClaimTemplate) -> list[FieldError]:
    """Metadata and the claim spec (`spec.spec`) of a ResourceClaimTemplate."""
    errors = validate_object_meta(template.metadata, namespaced=True)
    return errors + validate_resource_claim_spec(template.spec.spec, SPEC.child("spec"))


def validate_resource_claim_spec(spec: ResourceClaimSpec, path: FieldPath) -> list[FieldError]:
    """Requests (<= 32, unique names) and constraints (<= 32) of a claim spec at `path`."""
    return _validate_device_claim(spec.devices, path.child("devices"))


def _validate_device_claim(claim: DeviceClaim, path: FieldPath) -> list[FieldError]:
    requests_path = path.child("requests")
    errors = _validate_list(claim.requests, DEVICE_REQUESTS_MAX, _validate_request, requests_path)
    errors += check_unique_names([request.name for request in claim.requests], requests_path)
    known = _request_names(claim.requests)
    errors += _validate_list(
        claim.constraints,
        DEVICE_CONSTRAINTS_MAX,
        lambda constraint, at: _validate_constraint(constraint, at, known),
        path.child("constraints"),
    )
    return errors


def _validate_list(
    items: Sequence[Item],
    maximum: int,
    validate_item: Callable[[Item, FieldPath], list[FieldError]],
    path: FieldPath,
) -> list[FieldError]:
    # Items first, then the size, as `validateSlice` does: the size error must not hide the others.
    errors: list[FieldError] = []
    for position, item in enumerate(items):
        errors += validate_item(item, path.index(position))
    if len(items) > maximum:
        errors.append(too_many(path, len(items), maximum))
    return errors


def _request_names(requests: Sequence[DeviceRequest]) -> set[str]:
    names: set[str] = set()
    for request in requests:
        if request.name:
            names.add(request.name)
            names.update(f"{request.name}/{sub.name}" for sub in request.first_available if sub.name)
    return names


def _validate_request(request: DeviceRequest, path: FieldPath) -> list[FieldError]:
    errors = check_required_format(request.name, path.child("name"), dns1123_label_errors)
    chosen = (request.exactly is not None) + bool(request.first_available)
    if chosen == 0:
        errors.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif chosen == 2:
        detail = "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
        errors.append(invalid(path, None, detail))
    if request.exactly is not None:
        errors += _validate_exact(request.exactly, path.child("exactly"))
    if request.first_available:
        errors += _validate_first_available(request, path.child("firstAvailable"))
    return errors


def _validate_first_available(request: DeviceRequest, path: FieldPath) -> list[FieldError]:
    def validate_sub_request(sub: DeviceSubRequest, at: FieldPath) -> list[FieldError]:
        return check_required_format(sub.name, at.child("name"), dns1123_label_errors) + _validate_exact(
            sub, at
        )

    errors = _validate_list(request.first_available, FIRST_AVAILABLE_MAX, validate_sub_request, path)
    return errors + check_unique_names([sub.name for sub in request.first_available], path)


def _validate_exact(request: ExactDeviceRequest, path: FieldPath) -> list[FieldError]:
    errors = check_required_format(
        request.device_class_name, path.child("deviceClassName"), dns1123_subdomain_errors
    )
    errors += _validate_selectors(request.selectors, path.child("selectors"))
    errors += _validate_allocation_mode(request, path)
    if request.capacity is not None:
        requests_path = path.child("capacity", "requests")
        errors += _validate_quantities(request.capacity.requests, requests_path)
    return errors


def _validate_allocation_mode(request: ExactDeviceRequest, path: FieldPath) -> list[FieldError]:
    mode = request.allocation_mode or ALLOCATION_MODE_EXACT_COUNT
    if mode == ALLOCATION_MODE_EXACT_COUNT:
        if request.count is not None and request.count <= 0:
            return [invalid(path.child("count"), request.count, "must be greater than zero")]
        return []
    if mode == ALLOCATION_MODE_ALL:
        if request.count:
            detail = f"must not be specified when allocationMode is '{ALLOCATION_MODE_ALL}'"
            return [invalid(path.child("count"), request.count, detail)]
        return []
    return [not_supported(path.child("allocationMode"), mode, ALLOCATION_MODES)]


def _validate_selectors(selectors: Sequence[DeviceSelector], path: FieldPath) -> list[FieldError]:
    def validate_selector(selector: DeviceSelector, at: FieldPath) -> list[FieldError]:
        if selector.cel is None:
            return [required(at.child("cel"))]
        return selector_errors(selector.cel.expression, at.child("cel", "expression"))

    return _validate_list(selectors, DEVICE_SELECTORS_MAX, validate_selector, path)


def _validate_constraint(constraint: DeviceConstraint, path: FieldPath, known: set[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for position, name in enumerate(constraint.requests):
        at = path.child("requests").index(position)
        if name in seen:
            errors.append(duplicate(at, name))
        seen.add(name)
        if name not in known:
            detail = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
            errors.append(invalid(at, name, detail))
    errors += _validate_constraint_attribute(constraint, path)
    return errors


def _validate_constraint_attribute(constraint: DeviceConstraint, path: FieldPath) -> list[FieldError]:
    attributes = {
        "matchAttribute": constraint.match_attribute,
        "distinctAttribute": constraint.distinct_attribute,
    }
    chosen = {field: value for field, value in attributes.items() if value is not None}
    if not chosen:
        return [required(path, "exactly one of `matchAttribute` or `distinctAttribute` is required")]
    if len(chosen) > 1:
        detail = (
            "exactly one of `matchAttribute` or `distinctAttribute` is required, but multiple fields are set"
        )
        return [invalid(path, None, detail)]
    field, value = next(iter(chosen.items()))
    return _validate_fully_qualified_name(value, path.child(field))


def _validate_fully_qualified_name(name: str, path: FieldPath) -> list[FieldError]:
    errors = _validate_qualified_name(name, path)
    if name and "/" not in name:
        errors.append(invalid(path, name, "must include a domain"))
    return errors


def _validate_qualified_name(name: str, path: FieldPath) -> list[FieldError]:
    # Device attribute and capacity names: `name` (the driver's domain) or `domain/name`.
    if not name:
        return [required(path, "name required")]
    domain, _, identifier = name.rpartition("/")
    errors: list[FieldError] = []
    if "/" in name:
        if not domain:
            errors.append(required(path, "the domain must not be empty"))
        else:
            errors += _driver_name_errors(domain, path)
    if not identifier:
        errors.append(required(path, "the name must not be empty"))
        return errors
    if len(identifier) > ATTRIBUTE_NAME_MAX_LENGTH:
        errors.append(invalid(path, identifier, max_len_error(ATTRIBUTE_NAME_MAX_LENGTH)))
    errors += [invalid(path, identifier, message) for message in c_identifier_errors(identifier)]
    return errors


def _driver_name_errors(driver: str, path: FieldPath) -> list[FieldError]:
    messages = dns1123_subdomain_errors(driver.lower())
    if len(driver) > DRIVER_NAME_MAX_LENGTH:
        messages.insert(0, max_len_error(DRIVER_NAME_MAX_LENGTH))
    return [invalid(path, driver, message) for message in messages]


def _validate_quantities(quantities: dict[str, str], path: FieldPath) -> list[FieldError]:
    errors: list[FieldError] = []
    for name, amount in quantities.items():
        message = quantity_error(amount)
        if message is not None:
            errors.append(invalid(path.key(name), amount, message))
    return errors


def validate_resource_slice(resource_slice: ResourceSlice) -> list[FieldError]:
    """Driver, pool, node selection (exactly one way) and devices (<= 128, unique names) of a slice."""
    spec = resource_slice.spec
    errors = validate_object_meta(resource_slice.metadata, namespaced=False)
    if not spec.driver:
        errors.append(required(SPEC.child("driver")))
    else:
        errors += _driver_name_errors(spec.driver, SPEC.child("driver"))
    errors += _validate_pool(resource_slice, SPEC.child("pool"))
    errors += _validate_node_selection(resource_slice, SPEC)
    devices_path = SPEC.child("devices")
    errors += _validate_list(spec.devices, RESOURCE_SLICE_MAX_DEVICES, _validate_device, devices_path)
    errors += check_unique_names([device.name for device in spec.devices], devices_path)
    return errors


def _validate_pool(resource_slice: ResourceSlice, path: FieldPath) -> list[FieldError]:
    pool = resource_slice.spec.pool
    errors = [] if pool.name else [required(path.child("name"))]
    if pool.resource_slice_count is None or pool.resource_slice_count <= 0:
        count = pool.resource_slice_count or 0
        errors.append(invalid(path.child("resourceSliceCount"), count, "must be greater than zero"))
    if pool.generation is not None and pool.generation < 0:
        errors.append(
            invalid(path.child("generation"), pool.generation, "must be greater than or equal to zero")
        )
    return errors


def _validate_node_selection(resource_slice: ResourceSlice, path: FieldPath) -> list[FieldError]:
    spec = resource_slice.spec
    errors: list[FieldError] = []
    chosen: list[str] = []
    if spec.node_name:
        chosen.append("`nodeName`")
        errors += [
            invalid(path.child("nodeName"), spec.node_name, m)
            for m in dns1123_subdomain_errors(spec.node_name)
        ]
    if spec.node_selector is not None:
        chosen.append("`nodeSelector`")
        terms = spec.node_selector.node_selector_terms
        if len(terms) != 1:
            terms_path = path.child("nodeSelector", "nodeSelectorTerms")
            errors.append(
                invalid(terms_path, [t.to_wire() for t in terms], "must have exactly one node selector term")
            )
    if spec.all_nodes:
        chosen.append("`allNodes`")
    one_of = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required"
    if not chosen:
        errors.append(required(path, one_of))
    elif len(chosen) > 1:
        errors.append(invalid(path, "{" + ", ".join(chosen) + "}", f"{one_of}, but multiple fields are set"))
    return errors


def _validate_device(device: Device, path: FieldPath) -> list[FieldError]:
    errors = check_required_format(device.name, path.child("name"), dns1123_label_errors)
    for name, attribute in device.attributes.items():
        at = path.child("attributes").key(name)
        errors += _validate_qualified_name(name, at) + _validate_attribute_value(attribute, at)
    for name, capacity in device.capacity.items():
        at = path.child("capacity").key(name)
        errors += _validate_qualified_name(name, at)
        if capacity.value is None:
            errors.append(required(at.child("value")))
        elif (message := quantity_error(capacity.value)) is not None:
            errors.append(invalid(at.child("value"), capacity.value, message))
    return errors


def _validate_attribute_value(attribute: DeviceAttribute, path: FieldPath) -> list[FieldError]:
    values = [attribute.int_value, attribute.bool_value, attribute.string_value, attribute.version_value]
    count = sum(value is not None for value in values)
    if count == 0:
        return [required(path, "exactly one value must be specified")]
    if count > 1:
        return [invalid(path, attribute.to_wire(), "exactly one value must be specified")]
    return []
