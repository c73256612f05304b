"""API objects as the scheduling core sees them."""

from libs.core.dra import DeviceCatalog, DeviceClassInfo, claim_devices
from libs.core.dra.catalog import SliceDevices
from libs.core.scheduling import (
    RACK_KEY,
    GangRestartPolicy,
    PodPhase,
    TaintEffect,
    Toleration,
    TolerationOperator,
    TopologyDomainRef,
)
from libs.core.scheduling.objects import (
    ApiObject,
    core_node,
    core_podgroup,
    pod_phase,
    pod_request,
    standalone_podgroup,
)
from tests.unit.scheduling.manifests import (
    GPU_CLASS,
    cluster,
    pod,
    podgroup,
    stored,
    two_gpus_template,
    workload,
)

GIB = 1024**3


def catalog_with_gpu_class() -> DeviceCatalog:
    catalog = DeviceCatalog()
    gpu_class = stored(GPU_CLASS)
    catalog.put(DeviceClassInfo.of(gpu_class.name, gpu_class.spec))
    return catalog


def devices_of(slices: list[ApiObject]) -> list[SliceDevices]:
    return [SliceDevices(s.name, s.spec["driver"], tuple(s.spec["devices"])) for s in slices]


def test_gpus_published_in_a_nodes_slice_are_devices_of_the_class_whose_selector_matches():
    objects = cluster()
    node = next(o for o in objects if o.kind == "Node")
    slices = [o for o in objects if o.kind == "ResourceSlice" and o.spec.get("nodeName") == node.name]
    fabric = [o for o in objects if o.kind == "ResourceSlice" and not o.spec.get("nodeName")]

    devices = catalog_with_gpu_class().node_devices(devices_of(slices + fabric))

    assert devices == {"gpu.example.com": tuple(f"gpu-{i}" for i in range(8))}


def test_a_device_no_class_selects_is_not_counted():
    objects = cluster()
    slices = [o for o in objects if o.kind == "ResourceSlice" and o.spec.get("nodeName")]
    assert DeviceCatalog().node_devices(devices_of(slices[:1])) == {}


def test_a_node_maps_its_allocatable_labels_taints_and_cordon():
    node = stored(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {RACK_KEY: "r1"}},
            "spec": {
                "unschedulable": True,
                "taints": [{"key": "gpu", "value": "h200", "effect": "NoExecute"}],
            },
            "status": {"allocatable": {"cpu": "63500m", "memory": "512Gi", "pods": "110"}},
        }
    )

    core = core_node(node, {"gpu.example.com": ("gpu-0",)})

    assert (core.cpu_milli, core.memory, core.pods) == (63_500, 512 * GIB, 110)
    assert core.labels[RACK_KEY] == "r1"
    assert core.unschedulable
    assert core.taints[0].effect == TaintEffect.NO_EXECUTE
    assert core.devices == {"gpu.example.com": ("gpu-0",)}


def test_a_pod_asking_nvidia_gpu_gets_devices_of_the_class_that_serves_it():
    request = pod_request(pod("p", gpus=2, cpu="500m", memory="1Gi"), {"nvidia.com/gpu": "gpu.example.com"})

    assert request.cpu_milli == 500
    assert request.memory == GIB
    assert request.devices == {"gpu.example.com": 2}


def test_an_extended_resource_no_class_serves_asks_for_devices_no_node_has():
    request = pod_request(pod("p", gpus=1), {})
    assert request.devices == {"nvidia.com/gpu": 1}


def test_init_containers_and_overhead_count_as_kube_scheduler_counts_them():
    obj = pod("p", gpus=0, cpu="2", memory="1Gi")
    spec = dict(obj.spec)
    spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "4"}}}]
    spec["overhead"] = {"cpu": "100m"}
    request = pod_request(stored({"kind": "Pod", "metadata": dict(obj.metadata), "spec": spec}), {})
    assert request.cpu_milli == 4_100


def test_node_selector_and_tolerations_are_carried_over():
    obj = pod("p", node_selector={RACK_KEY: "r1"})
    spec = {**obj.spec, "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    request = pod_request(stored({"kind": "Pod", "metadata": dict(obj.metadata), "spec": spec}), {})

    assert request.node_selector == {RACK_KEY: "r1"}
    assert request.tolerations == (Toleration("gpu", TolerationOperator.EXISTS, "", TaintEffect.NO_SCHEDULE),)


def test_podway_annotations_come_from_the_podgroup_else_its_workload():
    group = podgroup(
        "g", annotations={"podway.io/max-pending-seconds": "30"}, topology_key=RACK_KEY, priority=7
    )
    owner = workload(
        annotations={
            "podway.io/max-pending-seconds": "600",
            "podway.io/topology-preferred": "topology.example.com/rack,topology.example.com/block",
        },
        job_owned=True,
    )

    core = core_podgroup(group, owner, domain=TopologyDomainRef(RACK_KEY, "r1"))

    assert core.max_pending_seconds == 30
    assert core.preferred_topology == ("topology.example.com/rack", "topology.example.com/block")
    assert core.gang_restart == GangRestartPolicy.ALWAYS
    assert (core.gang_min_count, core.topology_key, core.priority) == (4, RACK_KEY, 7)
    assert core.workload_name == "train"
    assert core.assigned_domain == TopologyDomainRef(RACK_KEY, "r1")


def test_a_standalone_podgroup_never_restarts_unless_asked():
    core = core_podgroup(podgroup("g", workload_name=None), None)
    assert core.gang_restart == GangRestartPolicy.NEVER
    assert core.workload_name is None


def test_a_basic_group_has_no_min_count():
    assert core_podgroup(podgroup("g", min_count=None), None).gang_min_count is None


def test_a_pod_without_a_podgroup_is_a_basic_group_of_its_own():
    core = standalone_podgroup(pod("solo", priority=5))
    assert core.key == "ml/pod/solo"
    assert core.gang_min_count is None
    assert core.priority == 5


def test_an_unknown_pod_phase_reads_as_unknown():
    assert pod_phase(pod("p", phase="Running")) == PodPhase.RUNNING
    assert pod_phase(pod("p", phase="Weird")) == PodPhase.UNKNOWN


TWO_GPUS = two_gpus_template()
FABRIC = stored(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "rack-fabric", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "f", "exactly": {"deviceClassName": "fabric.example.com"}}]}
            }
        },
    }
)
TEMPLATES = {"ml/two-gpus": TWO_GPUS.spec, "ml/rack-fabric": FABRIC.spec}
NODE_CLASSES = {"gpu.example.com"}


def claims_of(pod_obj: ApiObject, group: ApiObject | None = None) -> dict[str, int]:
    group_claims = group.spec.get("resourceClaims") or [] if group else []
    return claim_devices("ml", pod_obj.spec["resourceClaims"], group_claims, TEMPLATES, NODE_CLASSES)


def test_a_pods_own_claim_from_a_template_asks_for_its_devices_on_the_node():
    claimed = pod("p", gpus=0, claims=[{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}])
    assert claims_of(claimed) == {"gpu.example.com": 2}


def test_a_claim_shared_with_the_podgroup_is_not_counted_per_pod():
    claim = {"name": "gpus", "resourceClaimTemplateName": "two-gpus"}
    group = podgroup("g", claims=[claim])
    claimed = pod("p", gpus=0, group="g", claims=[claim])
    assert claims_of(claimed, group) == {}


def test_devices_that_are_not_on_nodes_are_left_to_the_dra_allocator():
    claimed = pod("p", gpus=0, claims=[{"name": "fabric", "resourceClaimTemplateName": "rack-fabric"}])
    assert claims_of(claimed) == {}
