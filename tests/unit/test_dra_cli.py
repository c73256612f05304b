"""What the CLI shows of DRA: claims in `get` and `describe`, a node's devices with their holders."""

from __future__ import annotations

from libs.client.describe import describe, node_device_lines
from libs.client.output import render
from libs.cluster.generator import ClusterShape, gpu_slice_manifest

GPU = "gpu.example.com"


def claim(name: str, results: list[dict], reserved: list[dict]) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": GPU}}]}},
        "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved}
        if results
        else {},
    }


def result(device: str, **consumed: str) -> dict:
    entry = {"request": "gpus", "driver": GPU, "pool": "n1", "device": device}
    if consumed:
        entry["consumedCapacity"] = {f"{GPU}/{name}": value for name, value in consumed.items()}
    return entry


HELD = claim("p-gpus", [result("gpu-0"), result("gpu-1")], [{"resource": "pods", "name": "p", "uid": "u1"}])
SHARES = [
    claim(
        f"s{i}-gpu",
        [result("gpu-7", cores="400m", memory="0")],
        [{"resource": "pods", "name": f"s{i}", "uid": "x"}],
    )
    for i in range(2)
]


def test_get_resourceclaims_shows_state_devices_and_reservation():
    table = render("ResourceClaim", [HELD, claim("idle", [], [])], "table")

    lines = table.splitlines()
    assert lines[0].split()[:5] == ["NAME", "STATE", "DEVICES", "RESERVED", "FOR"]
    assert lines[1].split()[:4] == ["p-gpus", "allocated,reserved", "n1/gpu-0,n1/gpu-1", "p"]
    assert lines[2].split()[:4] == ["idle", "pending", "-", "-"]


def test_describe_a_claim_lists_its_devices_and_who_reserves_it():
    page = describe(SHARES[0], [])

    assert (
        "Allocation:\n  gpus             gpu.example.com/n1/gpu-7 (shared: gpu.example.com/cores=400m" in page
    )
    assert "Reserved For:\n  pods/s0 (x)" in page


def test_describe_node_shows_each_device_its_holder_and_shared_capacity():
    node = {"kind": "Node", "metadata": {"name": "n1", "labels": {}}}
    slice_ = gpu_slice_manifest("n1", ClusterShape(shared_gpus_per_node=1))

    lines = node_device_lines(node, [slice_], [HELD, *SHARES])

    assert lines[0] == "Devices:"
    assert lines[1].split() == ["gpu.example.com/n1/gpu-0", "ml/p-gpus"]
    assert lines[3].split() == ["gpu.example.com/n1/gpu-2", "free"]
    assert lines[8].split()[:3] == ["gpu.example.com/n1/gpu-7", "ml/s0-gpu,", "ml/s1-gpu"]
    assert "cores 0.8/1 (80%)" in lines[8]
