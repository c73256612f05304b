from __future__ import annotations

from libs.client.output import WatchPrinter
from libs.client.usage import fleet_usage, gpu_request, render_usage


def pod(
    name: str, phase: str, node: str | None = None, rv: str = "1", gpus: int = 0, spec_node: str | None = None
) -> dict:
    """A pod as `get` returns it: the node it is bound to (or ran on) in `status.podway.nodeName`."""
    status: dict = {"phase": phase}
    if node:
        status["podway"] = {"nodeName": node}
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": name, "resourceVersion": rv},
        "spec": {
            "nodeName": node or spec_node,
            "containers": [{"resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": str(gpus)}}}],
        },
        "status": status,
    }


def test_a_watch_prints_the_table_then_one_row_per_change():
    lines: list[str] = []
    printer = WatchPrinter("Pod", "table", all_namespaces=False, out=lines.append)
    printer.first([pod("a", "Pending"), pod("b", "Pending")])
    assert [line.split()[:2] for line in lines] == [["NAME", "STATUS"], ["a", "Pending"], ["b", "Pending"]]
    printer.changed([pod("a", "Pending"), pod("b", "Pending")])
    assert len(lines) == 3  # nothing changed, nothing printed
    printer.changed([pod("a", "Running", "n1", rv="2"), pod("b", "Pending"), pod("c", "Pending")])
    assert [line.split()[:2] for line in lines[3:]] == [["a", "Running"], ["c", "Pending"]]
    assert lines[3].index("Running") == lines[0].index("STATUS")  # aligned with the first table


def test_gpu_use_by_node_and_rack():
    nodes = [
        {"metadata": {"name": f"n{i}", "labels": {"topology.example.com/rack": f"r{i // 2}"}}}
        for i in range(3)
    ]
    slices = [
        {"spec": {"nodeName": f"n{i}", "driver": "gpu.example.com", "devices": [{}] * 8}} for i in range(3)
    ] + [{"spec": {"nodeName": "n0", "driver": "fabric.example.com", "devices": [{}]}}]
    pods = [
        pod("a", "Running", "n0", gpus=2),
        pod("b", "Pending", "n0", gpus=4),  # bound, starting: holds its GPUs
        pod("c", "Succeeded", "n1", gpus=8),  # finished: released them
        pod("d", "Pending", None, gpus=8),  # not bound
        pod("e", "Pending", None, gpus=8, spec_node="n2"),  # its spec names a node, nothing bound it
    ]
    usage = fleet_usage(nodes, slices, pods)
    assert [(n.name, n.gpus, n.allocated, len(n.pods)) for n in usage.nodes] == [
        ("n0", 8, 6, 2),
        ("n1", 8, 0, 0),
        ("n2", 8, 0, 0),
    ]
    assert usage.nodes[0].cpu_millis == 1000
    assert usage.racks() == [("r0", 2, 16, 6), ("r1", 1, 8, 0)]
    table = render_usage(usage)
    node_row = next(line for line in table.splitlines() if line.startswith("n0 "))
    rack_row = next(line for line in table.splitlines() if line.startswith("r0 "))
    assert node_row.split()[2:5] == ["8", "6", "75%"]
    assert rack_row.split()[1:5] == ["2", "16", "6", "38%"]


def test_gpus_held_through_claims_count_on_their_node_once_each():
    nodes = [{"metadata": {"name": "n0"}}]
    devices = [{"name": f"gpu-{i}"} for i in range(4)]
    slices = [
        {"spec": {"nodeName": "n0", "driver": "gpu.example.com", "pool": {"name": "n0"}, "devices": devices}}
    ]

    def claim(*gpus: int, reserved: bool = True) -> dict:
        results = [{"driver": "gpu.example.com", "pool": "n0", "device": f"gpu-{i}"} for i in gpus]
        status = {"allocation": {"devices": {"results": results}}}
        if reserved:
            status["reservedFor"] = [{"resource": "pods", "name": "a", "uid": "a"}]
        return {"status": status}

    claims = [claim(0, 1), claim(1), claim(3, reserved=False)]  # gpu-1 shared; gpu-3 no longer reserved
    (n0,) = fleet_usage(nodes, slices, [pod("a", "Running", "n0", gpus=1)], claims).nodes
    assert (n0.gpus, n0.allocated) == (4, 3)


def test_gpus_come_from_requests_or_limits():
    limits_only = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}]}}
    assert gpu_request(limits_only) == 3
