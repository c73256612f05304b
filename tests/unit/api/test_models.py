"""The resource models: camelCase on the wire, built in code, and the helpers schedulers read."""

from __future__ import annotations

from libs.api.manifests import parse_object
from libs.api.models import (
    DeviceAttribute,
    NodeSelector,
    ObjectMeta,
    PodGroup,
    PodGroupSchedulingPolicy,
    PodGroupSpec,
    Taint,
    Toleration,
)
from tests.unit.api.builders import make_container, make_pod, make_slice


def test_models_built_in_code_fill_api_version_and_kind():
    pod_group = PodGroup(
        metadata=ObjectMeta(name="g", namespace="ml"),
        spec=PodGroupSpec(
            scheduling_policy=PodGroupSchedulingPolicy.model_validate({"gang": {"minCount": 2}})
        ),
    )
    assert pod_group.to_wire() == {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    assert pod_group.spec.scheduling_policy.gang_min_count == 2


def test_effective_pod_requests_count_init_containers_and_overhead():
    pod = parse_object(
        make_pod(
            containers=[
                make_container("a", requests={"cpu": "1"}),
                make_container("b", requests={"cpu": "500m"}),
            ],
            initContainers=[make_container("init", requests={"cpu": "2", "memory": "1Gi"})],
            overhead={"cpu": "100m"},
        )
    )
    assert pod.spec.requests() == {"cpu": 2100, "memory": 2**30}


def test_device_attributes_use_typed_wire_names():
    attribute = DeviceAttribute.model_validate({"int": 3})
    assert attribute.value == 3
    assert attribute.to_wire() == {"int": 3}


def test_tolerations_match_taints_as_kubernetes_does():
    taint = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")
    assert Toleration(key="nvidia.com/gpu", operator="Exists").tolerates(taint)
    assert Toleration(key="nvidia.com/gpu", value="present", effect="NoSchedule").tolerates(taint)
    assert not Toleration(key="nvidia.com/gpu", value="absent").tolerates(taint)
    assert not Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoExecute").tolerates(taint)
    assert Toleration(operator="Exists").tolerates(taint)


def test_node_selectors_select_by_labels_and_name():
    selector = NodeSelector.model_validate(
        {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r07"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-z"]}]},
            ]
        }
    )
    assert selector.matches("node-a", {"rack": "r07"})
    assert not selector.matches("node-a", {"rack": "r08"})
    assert selector.matches("node-z", {})


def test_node_selector_operators():
    def matches(operator: str, values: list[str], labels: dict[str, str]) -> bool:
        term = {"matchExpressions": [{"key": "k", "operator": operator, "values": values}]}
        return NodeSelector.model_validate({"nodeSelectorTerms": [term]}).matches("n", labels)

    assert matches("NotIn", ["a"], {"k": "b"})
    assert matches("NotIn", ["a"], {})
    assert matches("Exists", [], {"k": ""})
    assert not matches("Exists", [], {})
    assert matches("DoesNotExist", [], {})
    assert matches("Gt", ["3"], {"k": "4"})
    assert not matches("Gt", ["3"], {"k": "x"})
    assert matches("Lt", ["3"], {"k": "2"})
    assert not NodeSelector.model_validate({"nodeSelectorTerms": [{}]}).matches("n", {})


def test_resource_slice_devices_keep_unmodelled_fields():
    doc = make_slice()
    doc["spec"]["devices"][0]["consumesCounters"] = [{"counterSet": "gpu-0-counters"}]
    assert parse_object(doc).to_wire()["spec"]["devices"][0]["consumesCounters"] == [
        {"counterSet": "gpu-0-counters"}
    ]


def test_unquoted_yaml_numbers_in_labels_and_annotations_read_as_strings():
    doc = make_pod()
    doc["metadata"]["annotations"] = {"podway.io/run-seconds": 30, "flag": True}
    assert parse_object(doc).metadata.annotations == {"podway.io/run-seconds": "30", "flag": "true"}
