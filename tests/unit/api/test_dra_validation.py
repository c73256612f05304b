"""resource.k8s.io/v1: DeviceClass, ResourceClaim(Template) requests and constraints, ResourceSlice."""

from __future__ import annotations

from libs.api.manifests import validate_document
from tests.unit.api.builders import (
    error_lines,
    make_claim_template,
    make_device,
    make_device_class,
    make_request,
    make_slice,
)

REQUEST_REF = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)
DEVICES = "spec.spec.devices"


def test_the_api_md_dra_objects_are_admitted():
    template = make_claim_template(
        requests=[
            make_request(
                allocationMode="ExactCount",
                count=2,
                selectors=[{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "H200"'}}],
            )
        ],
        constraints=[{"requests": ["gpus"], "matchAttribute": "gpu.example.com/numaNode"}],
    )
    fabric_slice = make_slice(
        "rack-r07-fabric.example.com",
        devices=[
            {"name": "fabric", "attributes": {"rack": {"string": "r07"}}, "allowMultipleAllocations": True}
        ],
        driver="fabric.example.com",
        pool={"name": "rack-r07", "generation": 1, "resourceSliceCount": 1},
        nodeSelector={
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.example.com/rack", "operator": "In", "values": ["r07"]}
                    ]
                }
            ]
        },
    )
    for doc in (
        make_device_class(extendedResourceName="nvidia.com/gpu"),
        template,
        make_slice(),
        fabric_slice,
    ):
        result = validate_document(doc)
        assert result.ok, result.message


def test_requests_default_to_exact_count_of_one():
    result = validate_document(make_claim_template(requests=[make_request()]))
    exactly = result.obj.spec.spec.devices.requests[0].exactly
    assert (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)


def test_at_most_32_requests_with_unique_dns_label_names():
    requests = [make_request(f"r{i}") for i in range(32)] + [make_request("r0"), make_request("R")]
    lines = error_lines(make_claim_template(requests=requests))
    assert lines[0].startswith(f'{DEVICES}.requests[33].name: Invalid value: "R": a lowercase RFC 1123 label')
    assert lines[1:] == [
        f"{DEVICES}.requests: Too many: 34: must have at most 32 items",
        f'{DEVICES}.requests[32].name: Duplicate value: "r0"',
    ]


def test_exactly_one_of_exactly_or_first_available():
    both = {
        "name": "b",
        "exactly": {"deviceClassName": "gpu.example.com"},
        "firstAvailable": [{"name": "x", "deviceClassName": "gpu.example.com"}],
    }
    assert error_lines(make_claim_template(requests=[{"name": "a"}, both])) == [
        f"{DEVICES}.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
        f"{DEVICES}.requests[1]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
        "but multiple fields are set",
    ]


def test_allocation_mode_and_count():
    requests = [
        make_request("a", allocationMode="Some"),
        make_request("b", count=-1),
        make_request("c", allocationMode="All", count=2),
        make_request("d", allocationMode="All"),
    ]
    assert error_lines(make_claim_template(requests=requests)) == [
        f'{DEVICES}.requests[0].exactly.allocationMode: Unsupported value: "Some": supported values: "All", '
        '"ExactCount"',
        f"{DEVICES}.requests[1].exactly.count: Invalid value: -1: must be greater than zero",
        f"{DEVICES}.requests[2].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'",
    ]


def test_device_class_name_is_required():
    assert error_lines(make_claim_template(requests=[{"name": "a", "exactly": {}}])) == [
        f"{DEVICES}.requests[0].exactly.deviceClassName: Required value"
    ]


def test_first_available_sub_requests_are_named_unique_and_validated():
    request = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.example.com", "count": 0},
            {"name": "big", "deviceClassName": "gpu.example.com", "allocationMode": "Any"},
        ],
    }
    assert error_lines(make_claim_template(requests=[request])) == [
        f'{DEVICES}.requests[0].firstAvailable[1].allocationMode: Unsupported value: "Any": supported values: '
        '"All", "ExactCount"',
        f'{DEVICES}.requests[0].firstAvailable[1].name: Duplicate value: "big"',
    ]


def test_capacity_requests_are_quantities():
    request = make_request(capacity={"requests": {"memory": "ten"}})
    assert error_lines(make_claim_template(requests=[request]))[0].startswith(
        f'{DEVICES}.requests[0].exactly.capacity.requests[memory]: Invalid value: "ten": quantities must match'
    )


def test_constraints_name_existing_requests_and_one_attribute():
    first_available = {
        "name": "alt",
        "firstAvailable": [{"name": "small", "deviceClassName": "gpu.example.com"}],
    }
    constraints = [
        {"requests": ["gpus", "alt/small", "nope", "gpus"], "distinctAttribute": "gpu.example.com/pcieRoot"},
        {"requests": ["gpus"]},
        {"matchAttribute": "numaNode"},
        {"matchAttribute": "a/b", "distinctAttribute": "a/c"},
    ]
    assert error_lines(
        make_claim_template(requests=[make_request(), first_available], constraints=constraints)
    ) == [
        f'{DEVICES}.constraints[0].requests[2]: Invalid value: "nope": {REQUEST_REF}',
        f'{DEVICES}.constraints[0].requests[3]: Duplicate value: "gpus"',
        f"{DEVICES}.constraints[1]: Required value: exactly one of `matchAttribute` or `distinctAttribute` is required",
        f'{DEVICES}.constraints[2].matchAttribute: Invalid value: "numaNode": must include a domain',
        f"{DEVICES}.constraints[3]: Invalid value: null: exactly one of `matchAttribute` or `distinctAttribute` is "
        "required, but multiple fields are set",
    ]


def test_at_most_32_constraints():
    constraints = [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/numaNode"}] * 33
    assert error_lines(make_claim_template(constraints=constraints)) == [
        f"{DEVICES}.constraints: Too many: 33: must have at most 32 items"
    ]


def test_a_claim_validates_at_spec_devices():
    doc = make_claim_template(requests=[{"name": "a"}])
    claim = {**doc, "kind": "ResourceClaim", "spec": doc["spec"]["spec"]}
    assert error_lines(claim) == [
        "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"
    ]


def test_claim_and_template_specs_are_immutable():
    old, new = make_claim_template(), make_claim_template(requests=[make_request(count=4)])
    lines = error_lines(new, old=old)
    assert len(lines) == 1
    assert lines[0].startswith(
        'spec: Invalid value: {"spec":{"devices":{"requests":[{"exactly":{"allocationMode"'
    )
    assert lines[0].endswith("field is immutable")


def test_device_class_selectors_need_cel():
    doc = make_device_class()
    doc["spec"]["selectors"] = [{}]
    assert error_lines(doc) == ["spec.selectors[0].cel: Required value"]


def test_device_class_extended_resource_name_has_a_foreign_domain():
    assert error_lines(make_device_class(extendedResourceName="kubernetes.io/gpu")) == [
        'spec.extendedResourceName: Invalid value: "kubernetes.io/gpu": must be an extended resource name '
        "(a domain outside kubernetes.io)"
    ]


def test_slice_needs_exactly_one_of_node_name_node_selector_all_nodes():
    doc = make_slice(allNodes=True)
    del doc["spec"]["allNodes"]
    assert error_lines(doc) == [
        "spec: Required value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required"
    ]
    assert error_lines(make_slice(nodeName="node-a", allNodes=True)) == [
        'spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, or '
        "`allNodes` is required, but multiple fields are set"
    ]


def test_slice_node_selector_has_exactly_one_term():
    assert error_lines(make_slice(nodeSelector={"nodeSelectorTerms": []})) == [
        "spec.nodeSelector.nodeSelectorTerms: Invalid value: []: must have exactly one node selector term"
    ]


def test_at_most_128_devices_per_slice_with_unique_names():
    devices = [make_device(f"gpu-{i}") for i in range(128)] + [make_device("gpu-0")]
    assert error_lines(make_slice(devices=devices)) == [
        "spec.devices: Too many: 129: must have at most 128 items",
        'spec.devices[128].name: Duplicate value: "gpu-0"',
    ]


def test_slice_driver_and_pool():
    doc = make_slice(driver="", pool={"generation": -1, "resourceSliceCount": 0})
    assert error_lines(doc) == [
        "spec.driver: Required value",
        "spec.pool.name: Required value",
        "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
        "spec.pool.generation: Invalid value: -1: must be greater than or equal to zero",
    ]


def test_device_attributes_have_exactly_one_value_and_c_identifier_names():
    device = make_device(
        attributes={"model": {}, "speed": {"int": 1, "string": "fast"}, "bad-name": {"bool": True}},
        capacity={"memory": {"value": "lots"}},
    )
    lines = error_lines(make_slice(devices=[device]))
    assert (
        lines[0] == "spec.devices[0].attributes[model]: Required value: exactly one value must be specified"
    )
    assert lines[1] == (
        'spec.devices[0].attributes[speed]: Invalid value: {"int":1,"string":"fast"}: exactly one value must be '
        "specified"
    )
    assert lines[2].startswith(
        'spec.devices[0].attributes[bad-name]: Invalid value: "bad-name": a valid C identifier must start'
    )
    assert lines[3].startswith(
        'spec.devices[0].capacity[memory].value: Invalid value: "lots": quantities must'
    )
