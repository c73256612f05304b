"""The allocation search, rule by rule: each with a case that allocates and one that must not."""

from __future__ import annotations

from libs.core.dra import ClaimAllocation, DeviceUsage, allocate, allocate_for_group
from libs.core.dra.allocator import DeviceResult
from libs.core.dra.claims import ClaimSpec

from .builders import RACK_KEY, claim, eight_gpus, exactly, fabric_slice, gpu, inventory, node_slice

H200 = 'device.attributes["gpu.example.com"].model == "H200"'
BIG_MEMORY = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("100Gi")) >= 0'


def names(allocations: tuple[ClaimAllocation, ...] | None) -> list[list[str]]:
    assert allocations is not None
    return [[result.device.name for result in allocation.results] for allocation in allocations]


def hold(usage: DeviceUsage, inv, node: str, *device_names: str, claim_key: str = "other/claim") -> None:
    devices = {device.name: device for device in inv.node_devices(node)}
    usage.take(
        ClaimAllocation(claim_key, tuple(DeviceResult("r", devices[name]) for name in device_names), None)
    )


def test_exact_count_takes_that_many_devices_in_order():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    assert names(allocate([claim("c", exactly(count=2))], "a", inv, DeviceUsage())) == [["gpu-0", "gpu-1"]]


def test_exact_count_beyond_the_node_fails():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    assert allocate([claim("c", exactly(count=9))], "a", inv, DeviceUsage()) is None


def test_devices_of_another_node_are_not_reachable():
    inv = inventory({"a": node_slice("a", eight_gpus()), "b": node_slice("b", [gpu("gpu-0")])})
    assert allocate([claim("c", exactly(count=2))], "b", inv, DeviceUsage()) is None


def test_allocation_mode_all_takes_every_matching_device():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    found = allocate([claim("c", exactly(count=None, mode="All"))], "a", inv, DeviceUsage())
    assert len(names(found)[0]) == 8


def test_allocation_mode_all_fails_when_one_matching_device_is_held():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    usage = DeviceUsage()
    hold(usage, inv, "a", "gpu-3")
    assert allocate([claim("c", exactly(count=None, mode="All"))], "a", inv, usage) is None


def test_selectors_keep_only_matching_devices():
    devices = [gpu("gpu-0", model="A100", memory="80Gi"), gpu("gpu-1", model="H200")]
    inv = inventory({"a": node_slice("a", devices)})
    found = allocate([claim("c", exactly(selectors=(H200, BIG_MEMORY)))], "a", inv, DeviceUsage())
    assert names(found) == [["gpu-1"]]


def test_selectors_matching_no_device_fail():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0", model="A100", memory="80Gi")])})
    assert allocate([claim("c", exactly(selectors=(H200,)))], "a", inv, DeviceUsage()) is None


def test_a_selector_failing_at_run_time_selects_nothing():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    missing = 'device.attributes["gpu.example.com"].nosuch == "x"'
    assert allocate([claim("c", exactly(selectors=(missing,)))], "a", inv, DeviceUsage()) is None


def test_selectors_are_evaluated_once_per_device_description_not_per_search():
    inv = inventory({f"n{i}": node_slice(f"n{i}", eight_gpus(numa_split=8)) for i in range(20)})
    request = claim("c", exactly(selectors=(H200,)))
    for i in range(20):
        assert allocate([request], f"n{i}", inv, DeviceUsage()) is not None
    # Per node, 8 GPUs differing only in their pcieRoot: 4 descriptions x (class + request selector).
    assert inv.selectors.evaluations == 8


def test_first_available_takes_the_first_alternative_that_fits():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0", model="A100", memory="80Gi")])})
    request = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "h200",
                "deviceClassName": "gpu.example.com",
                "selectors": [{"cel": {"expression": H200}}],
            },
            {"name": "any", "deviceClassName": "gpu.example.com"},
        ],
    }
    found = allocate([claim("c", request)], "a", inv, DeviceUsage())
    assert found is not None
    assert [result.request for result in found[0].results] == ["gpu/any"]


def test_first_available_prefers_the_earlier_alternative():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0", model="A100", memory="80Gi"), gpu("gpu-1")])})
    request = {
        "name": "gpu",
        "firstAvailable": [
            {
                "name": "h200",
                "deviceClassName": "gpu.example.com",
                "selectors": [{"cel": {"expression": H200}}],
            },
            {"name": "any", "deviceClassName": "gpu.example.com"},
        ],
    }
    found = allocate([claim("c", request)], "a", inv, DeviceUsage())
    assert found is not None
    assert [(r.request, r.device.name) for r in found[0].results] == [("gpu/h200", "gpu-1")]


def test_first_available_fails_when_no_alternative_fits():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0")])})
    request = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "two", "deviceClassName": "gpu.example.com", "count": 2},
            {"name": "fabric", "deviceClassName": "fabric.example.com"},
        ],
    }
    assert allocate([claim("c", request)], "a", inv, DeviceUsage()) is None


def test_match_attribute_backtracks_to_one_numa_node():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    usage = DeviceUsage()
    hold(usage, inv, "a", "gpu-0", "gpu-1", "gpu-2")  # NUMA 0 keeps one GPU free
    same_numa = [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/numaNode"}]
    found = allocate([claim("c", exactly(count=2), constraints=same_numa)], "a", inv, usage)
    assert names(found) == [["gpu-4", "gpu-5"]]


def test_match_attribute_fails_when_no_numa_node_has_enough():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    usage = DeviceUsage()
    hold(usage, inv, "a", "gpu-0", "gpu-1", "gpu-2", "gpu-4", "gpu-5", "gpu-6")
    same_numa = [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/numaNode"}]
    assert allocate([claim("c", exactly(count=2), constraints=same_numa)], "a", inv, usage) is None


def test_match_attribute_spans_requests_of_the_claim():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    usage = DeviceUsage()
    hold(usage, inv, "a", "gpu-1", "gpu-2", "gpu-3")
    constraint = [{"requests": ["first", "second"], "matchAttribute": "gpu.example.com/numaNode"}]
    found = allocate(
        [claim("c", exactly("first"), exactly("second"), constraints=constraint)], "a", inv, usage
    )
    # gpu-0 alone on NUMA 0 cannot pair: the search goes back and takes NUMA 1.
    assert names(found) == [["gpu-4", "gpu-5"]]


def test_match_attribute_on_a_missing_attribute_fails():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    constraint = [{"requests": [], "matchAttribute": "gpu.example.com/nosuch"}]
    assert allocate([claim("c", exactly(count=2), constraints=constraint)], "a", inv, DeviceUsage()) is None


def test_distinct_attribute_spreads_over_pcie_roots():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    distinct = [{"requests": ["gpus"], "distinctAttribute": "gpu.example.com/pcieRoot"}]
    found = allocate([claim("c", exactly(count=3), constraints=distinct)], "a", inv, DeviceUsage())
    assert names(found) == [["gpu-0", "gpu-2", "gpu-4"]]


def test_distinct_attribute_fails_with_too_few_distinct_values():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    distinct = [{"requests": ["gpus"], "distinctAttribute": "gpu.example.com/numaNode"}]
    assert allocate([claim("c", exactly(count=3), constraints=distinct)], "a", inv, DeviceUsage()) is None


def test_shares_of_a_shareable_device_add_up_to_its_capacity():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0", shared=True)])})
    usage = DeviceUsage()
    for key in ("one", "two"):
        found = allocate([claim(key, exactly(capacity={"cores": "460m"}))], "a", inv, usage)
        assert found is not None
        usage.take(found[0])
    assert usage.consumed["gpu.example.com/a/gpu-0"]["gpu.example.com/cores"] == 920
    assert allocate([claim("three", exactly(capacity={"cores": "100m"}))], "a", inv, usage) is None
    assert allocate([claim("three", exactly(capacity={"cores": "80m"}))], "a", inv, usage) is not None


def test_a_share_without_a_default_for_a_capacity_consumes_all_of_it():
    device = gpu("gpu-0", shared=True)
    del device["capacity"]["memory"]["requestPolicy"]
    inv = inventory({"a": node_slice("a", [device])})
    usage = DeviceUsage()
    first = allocate([claim("one", exactly(capacity={"cores": "100m"}))], "a", inv, usage)
    assert first is not None
    usage.take(first[0])
    assert allocate([claim("two", exactly(capacity={"cores": "100m"}))], "a", inv, usage) is None
    assert (
        allocate([claim("two", exactly(capacity={"cores": "100m", "memory": "1Gi"}))], "a", inv, usage)
        is None
    )


def test_a_capacity_request_larger_than_the_device_fails():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0", shared=True, memory="80Gi")])})
    assert allocate([claim("c", exactly(capacity={"memory": "100Gi"}))], "a", inv, DeviceUsage()) is None


def test_a_capacity_request_naming_a_capacity_the_device_lacks_fails():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0", shared=True)])})
    assert allocate([claim("c", exactly(capacity={"bandwidth": "1"}))], "a", inv, DeviceUsage()) is None


def test_a_whole_device_request_on_a_shareable_device_consumes_all_of_it():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0", shared=True)])})
    usage = DeviceUsage()
    whole = allocate([claim("whole", exactly())], "a", inv, usage)
    assert whole is not None
    usage.take(whole[0])
    assert allocate([claim("share", exactly(capacity={"cores": "1m"}))], "a", inv, usage) is None
    usage.release(whole[0])
    assert allocate([claim("share", exactly(capacity={"cores": "1m"}))], "a", inv, usage) is not None


def test_an_exclusive_device_held_by_a_claim_is_skipped():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    usage = DeviceUsage()
    hold(usage, inv, "a", "gpu-0")
    assert names(allocate([claim("c", exactly())], "a", inv, usage)) == [["gpu-1"]]
    hold(usage, inv, "a", *[f"gpu-{i}" for i in range(1, 8)])
    assert allocate([claim("c", exactly())], "a", inv, usage) is None


def test_two_claims_searched_together_never_share_a_device():
    inv = inventory({"a": node_slice("a", [gpu("gpu-0"), gpu("gpu-1")])})
    found = allocate([claim("c1", exactly()), claim("c2", exactly())], "a", inv, DeviceUsage())
    assert names(found) == [["gpu-0"], ["gpu-1"]]
    assert allocate([claim("c1", exactly(count=2)), claim("c2", exactly())], "a", inv, DeviceUsage()) is None


def test_only_the_newest_generation_of_a_pool_counts():
    inv = inventory(
        {
            "old": node_slice("a", eight_gpus(), generation=1),
            "new": node_slice("a", [gpu("gpu-9")], generation=2),
        }
    )
    assert [device.name for device in inv.node_devices("a")] == ["gpu-9"]


def test_a_rack_fabric_is_reachable_only_from_its_rack():
    labels = {"a": {RACK_KEY: "r1"}, "b": {RACK_KEY: "r2"}}
    inv = inventory({"r1": fabric_slice("r1"), "r2": fabric_slice("r2")}, labels)
    found = allocate(
        [claim("g", exactly("fabric", device_class="fabric.example.com"))], "b", inv, DeviceUsage()
    )
    assert found is not None
    assert found[0].results[0].device.attributes["fabric.example.com/rack"] == "r2"
    assert found[0].nodes == frozenset({"b"})
    assert (
        allocate([claim("g", exactly("fabric", device_class="fabric.example.com"))], None, inv, DeviceUsage())
        is None
    )


def test_group_claims_offer_one_allocation_per_rack():
    labels = {f"n{i}": {RACK_KEY: f"r{i // 2}"} for i in range(6)}
    inv = inventory({f"r{r}": fabric_slice(f"r{r}") for r in range(3)}, labels)
    fabric = [claim("g", exactly("fabric", device_class="fabric.example.com"))]
    options = list(allocate_for_group(fabric, sorted(labels), inv, DeviceUsage()))
    assert [sorted(option[0].nodes or ()) for option in options] == [["n0", "n1"], ["n2", "n3"], ["n4", "n5"]]


def test_a_search_out_of_budget_fails_instead_of_hanging():
    inv = inventory({"a": node_slice("a", [gpu(f"gpu-{i}", numa=i) for i in range(40)])})
    same_numa = [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/numaNode"}]
    assert (
        allocate([claim("c", exactly(count=2), constraints=same_numa)], "a", inv, DeviceUsage(), budget=500)
        is None
    )


def test_usage_check_reports_a_device_taken_since():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    usage = DeviceUsage()
    proposal = allocate([claim("c", exactly())], "a", inv, usage)
    assert proposal is not None
    assert usage.check(proposal) is None
    hold(usage, inv, "a", "gpu-0")
    assert usage.check(proposal) == "device gpu.example.com/a/gpu-0 is already allocated to other/claim"


# -- claims allocated already (an existing ResourceClaim pods share) ------------------------------------------


def allocated(*device_ids: str) -> ClaimSpec:
    return ClaimSpec("gpu", (), (), "shared-gpu", device_ids)


def test_an_allocated_claim_takes_nothing_on_the_node_of_its_device():
    inv = inventory({"a": node_slice("a", eight_gpus()), "b": node_slice("b", eight_gpus())})
    usage = DeviceUsage()
    hold(usage, inv, "a", "gpu-0", claim_key="ml/shared-gpu")

    (found,) = allocate([allocated("gpu.example.com/a/gpu-0")], "a", inv, usage) or ()

    assert found.results == ()
    assert found.resource_claim == "shared-gpu"
    assert found.nodes == frozenset({"a"})


def test_an_allocated_claim_refuses_a_node_that_does_not_reach_its_device():
    inv = inventory({"a": node_slice("a", eight_gpus()), "b": node_slice("b", eight_gpus())})
    assert allocate([allocated("gpu.example.com/a/gpu-0")], "b", inv, DeviceUsage()) is None


def test_an_allocated_claim_whose_device_is_gone_refuses_every_node():
    inv = inventory({"a": node_slice("a", eight_gpus())})
    assert allocate([allocated("gpu.example.com/a/gpu-9")], "a", inv, DeviceUsage()) is None


def test_an_allocated_fabric_claim_admits_the_nodes_its_selector_reaches():
    labels = {"a": {RACK_KEY: "r1"}, "b": {RACK_KEY: "r2"}}
    inv = inventory({"r1": fabric_slice("r1"), "a": node_slice("a", eight_gpus())}, labels)
    fabric = allocated("fabric.example.com/rack-r1/fabric")

    assert allocate([fabric], "b", inv, DeviceUsage()) is None
    both = allocate([fabric, claim("own", exactly(count=2))], "a", inv, DeviceUsage())
    assert names(both) == [[], ["gpu-0", "gpu-1"]]
    assert both is not None
    assert both[0].nodes == frozenset({"a"})
