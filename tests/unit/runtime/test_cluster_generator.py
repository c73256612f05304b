from libs.api.manifests import validate_document
from libs.cluster.generator import RACK_KEY, ClusterShape, generate_cluster


def test_generated_cluster_is_valid_and_has_the_requested_topology():
    shape = ClusterShape(zones=1, blocks=2, racks_per_block=3, nodes_per_rack=4, gpus_per_node=8)
    manifests = generate_cluster(shape)
    nodes = [m for m in manifests if m["kind"] == "Node"]
    slices = [m for m in manifests if m["kind"] == "ResourceSlice"]
    assert len(nodes) == 24
    assert len({n["metadata"]["labels"][RACK_KEY] for n in nodes}) == 6
    assert len(slices) == 24 + 6  # one GPU slice per node, one fabric slice per rack
    assert all(validate_document(m).ok for m in manifests)
    gpu_slice = next(s for s in slices if s["spec"].get("nodeName") == nodes[0]["metadata"]["name"])
    assert [d["name"] for d in gpu_slice["spec"]["devices"]] == [f"gpu-{i}" for i in range(8)]
    numa = [d["attributes"]["numaNode"]["int"] for d in gpu_slice["spec"]["devices"]]
    assert numa == [0, 0, 0, 0, 1, 1, 1, 1]
