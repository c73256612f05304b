"""Placement policies on a small fleet: each picks the node (and GPUs) its rule says, among nodes that fit."""

from __future__ import annotations

import numpy as np
import pytest

from libs.core.placement import (
    POLICY_NAMES,
    GpuFleet,
    NodeSpec,
    PodDemand,
    ShapeMix,
    expected_fragmentation,
    make_policy,
)
from libs.core.placement.fleet import Choice
from libs.core.placement.fragmentation import unfed_gpu_milli


def fleet(*nodes: NodeSpec) -> GpuFleet:
    return GpuFleet(list(nodes))


def gpu_node(
    name: str, gpus: int = 8, cpu: int = 96_000, memory: int = 393_216, model: str = "G2"
) -> NodeSpec:
    return NodeSpec(name, cpu, memory, gpus, model)


def pod(
    name: str = "p", cpu: int = 4_000, memory: int = 8_192, gpus: int = 0, milli: int = 0, models=()
) -> PodDemand:
    return PodDemand(name, cpu, memory, gpus, milli if gpus else 0, frozenset(models))


def test_a_node_fits_only_with_cpu_memory_gpu_room_and_an_accepted_model():
    nodes = fleet(
        gpu_node("a", cpu=2_000),
        gpu_node("b", memory=1_024),
        gpu_node("c", model="T4"),
        gpu_node("d", gpus=1),
        gpu_node("e"),
    )
    nodes.gpu_free[3, 0] = 300
    wanted = pod(gpus=1, milli=500, models=("G2",))
    assert nodes.feasible(wanted).tolist() == [False, False, False, False, True]


def test_first_fit_takes_the_first_node_that_fits():
    nodes = fleet(gpu_node("a", gpus=1), gpu_node("b"), gpu_node("c"))
    nodes.place(pod(gpus=1, milli=1000), Choice(0, (0,)))
    choice = make_policy("first-fit").choose(nodes, pod(gpus=2, milli=1000))
    assert choice == Choice(1, (0, 1))


def test_best_fit_takes_the_node_with_the_least_leftover():
    nodes = fleet(gpu_node("a"), gpu_node("b"), gpu_node("c"))
    nodes.place(pod(cpu=40_000, gpus=4, milli=1000), Choice(1, (0, 1, 2, 3)))
    nodes.place(pod(cpu=2_000, gpus=6, milli=1000), Choice(2, (0, 1, 2, 3, 4, 5)))
    # Leftovers after a 1-GPU pod of 4 cores: a 0.5 * 88/128 + 0.5 * 7/8 = 0.78, b 0.5 * 52/128 + 0.5 * 3/8 =
    # 0.39, c 0.5 * 90/128 + 0.5 * 1/8 = 0.41.
    assert make_policy("best-fit", seed=1).choose(nodes, pod(gpus=1, milli=1000)) == Choice(1, (4,))


def test_a_shared_gpu_goes_where_the_least_room_holds_it():
    nodes = fleet(gpu_node("a", gpus=4))
    nodes.gpu_free[0] = [1000, 600, 300, 700]
    assert make_policy("best-fit", seed=1).choose(nodes, pod(gpus=1, milli=500)) == Choice(0, (1,))


def test_podway_packs_the_node_with_the_least_free_gpus_ties_by_name():
    nodes = fleet(gpu_node("c"), gpu_node("b"), gpu_node("a"))
    nodes.place(pod(gpus=2, milli=1000), Choice(0, (0, 1)))
    policy = make_policy("podway")
    assert policy.choose(nodes, pod(gpus=1, milli=1000)) == Choice(0, (2,))
    nodes.place(pod(gpus=6, milli=1000), Choice(0, (2, 3, 4, 5, 6, 7)))
    assert policy.choose(nodes, pod(gpus=1, milli=1000)) == Choice(2, (0,))


def test_podway_packs_cpu_pods_by_free_whole_cores_ties_by_name():
    nodes = fleet(gpu_node("c", cpu=32_000), gpu_node("b", cpu=16_500), gpu_node("a", cpu=16_900))
    policy = make_policy("podway")
    # b and a both hold 16 whole cores: the name decides; c (32 cores) is looser.
    assert policy.choose(nodes, pod(cpu=12_000)) == Choice(2, ())
    nodes.place(pod(cpu=12_000), Choice(2, ()))
    assert policy.choose(nodes, pod(cpu=12_000)) == Choice(1, ())
    assert policy.choose(nodes, pod(cpu=17_000)) == Choice(0, ())


def test_podway_forgets_the_nodes_of_a_fleet_it_no_longer_places_on():
    policy = make_policy("podway")
    first = fleet(gpu_node("a", gpus=1))
    assert policy.choose(first, pod(gpus=1, milli=1000)) == Choice(0, (0,))
    assert policy.choose(fleet(gpu_node("z", gpus=8)), pod(gpus=1, milli=1000)) == Choice(0, (0,))


def test_random_is_seeded_and_only_picks_nodes_that_fit():
    nodes = fleet(*(gpu_node(f"n{i}", cpu=2_000 if i % 2 else 96_000) for i in range(20)))
    wanted = pod(cpu=4_000, gpus=1, milli=1000)
    first = [make_policy("random", seed=7).choose(nodes, wanted) for _ in range(3)]
    picks = {make_policy("random", seed=seed).choose(nodes, wanted).node for seed in range(40)}
    assert len(set(first)) == 1
    assert picks <= set(range(0, 20, 2))
    assert len(picks) > 3


def test_no_policy_places_a_pod_that_fits_nowhere():
    nodes = fleet(gpu_node("a", gpus=2))
    for name in POLICY_NAMES:
        policy = make_policy(name, seed=1, workload=[pod(gpus=1, milli=1000)])
        assert policy.choose(nodes, pod(gpus=4, milli=1000)) is None


def test_fragmentation_counts_gpus_a_shape_cannot_use():
    mix = ShapeMix.of([pod(cpu=8_000, gpus=1, milli=1000), pod(cpu=8_000, gpus=1, milli=500)])
    gpu_free = np.array([[1000, 400, 700, 0], [1000, 1000, 0, 0], [300, 300, 0, 0]])
    cpu_free = np.array([16_000, 4_000, 16_000])
    memory_free = np.array([100_000, 100_000, 100_000])
    access = np.ones((3, 2), dtype=bool)
    # Equal weights: the whole-GPU shape strands 400+700 on the first node, the half-GPU shape 400; the second
    # node lacks CPU for both (all 2000 stranded); the third has no GPU with room for either.
    assert expected_fragmentation(mix, cpu_free, memory_free, gpu_free, access).tolist() == pytest.approx(
        [(1100 + 400) / 2, 2000, 600]
    )


def test_shape_mix_weighs_shapes_by_the_gpus_they_bring():
    workload = [
        pod(gpus=8, milli=1000),
        pod(gpus=1, milli=1000),
        pod(gpus=1, milli=1000),
        pod(gpus=1, milli=250),
    ]
    mix = ShapeMix.of(workload)
    weights = {
        (gpus, milli): weight
        for gpus, milli, weight in zip(
            mix.gpus.tolist(), mix.gpu_milli.tolist(), mix.weight.tolist(), strict=True
        )
    }
    # A shared shape weighs as much as one whole GPU.
    assert weights == pytest.approx({(8, 1000): 8 / 11, (1, 1000): 2 / 11, (1, 250): 1 / 11})


def test_fgd_shares_the_gpu_whose_use_strands_the_least():
    workload = [pod(cpu=1_000, gpus=1, milli=1000)] * 3 + [pod(cpu=1_000, gpus=1, milli=600)]
    nodes = fleet(gpu_node("a", gpus=2))
    nodes.gpu_free[0] = [1000, 600]
    # Sharing the 600 GPU leaves the whole GPU for whole-GPU pods; the tightest-room rule agrees here.
    assert make_policy("fgd", workload=workload).choose(nodes, pod(cpu=1_000, gpus=1, milli=600)) == Choice(
        0, (1,)
    )


def test_fgd_keeps_whole_gpus_whole_where_packing_would_break_one():
    workload = [pod(cpu=1_000, gpus=1, milli=1000)] * 3 + [pod(cpu=1_000, gpus=1, milli=500)]
    nodes = fleet(gpu_node("a", gpus=2), gpu_node("b", gpus=2))
    nodes.gpu_free[0] = [1000, 0]  # a: one whole GPU left
    nodes.gpu_free[1] = [1000, 600]  # b: a shared GPU with room
    shared = pod(cpu=1_000, gpus=1, milli=500)
    assert make_policy("podway").choose(nodes, shared) == Choice(0, (0,))
    assert make_policy("fgd", workload=workload).choose(nodes, shared) == Choice(1, (1,))


def test_shape_mix_knows_the_cpu_its_gpu_pods_ask_per_gpu():
    workload = [pod(cpu=12_000, gpus=1, milli=1000), pod(cpu=6_000, gpus=1, milli=500), pod(cpu=32_000)]
    # CPU-only pods ask no GPU to feed: (12,000 + 6,000) milli-CPU over 1,500 milli-GPUs.
    assert ShapeMix.of(workload).cpu_per_gpu == pytest.approx(12.0)


def test_unfed_gpus_are_those_the_free_cpu_cannot_feed_at_the_rate():
    gpu_free = np.array([8_000, 2_000, 0, 4_000])
    cpu_free = np.array([48_000, 48_000, 12_000, 0])
    assert unfed_gpu_milli(gpu_free, cpu_free, 12.0).tolist() == [4_000, 0, 0, 4_000]
    assert unfed_gpu_milli(gpu_free, cpu_free, 0.0).tolist() == [0, 0, 0, 0]


def test_fgd_cpu_ratio_keeps_the_cpu_a_node_needs_for_its_free_gpus():
    gpu_pod, cpu_pod = pod(cpu=12_000, gpus=1, milli=1000), pod(cpu=12_000)
    workload = [gpu_pod, cpu_pod]
    tight = gpu_node("a", gpus=2, cpu=24_000)  # CPU for exactly its two GPUs
    roomy = gpu_node("b", gpus=8, cpu=200_000)  # CPU to spare
    # After the CPU pod, a can still run one GPU pod, so fgd sees no fragment on either node and packs a;
    # but a's second GPU is then unfed (12 cores left for 2 GPUs), while b loses nothing it needs.
    chosen = {}
    for name in ("fgd", "fgd-cpu-ratio"):
        nodes = fleet(tight, roomy)
        policy = make_policy(name, workload=workload)
        chosen[name] = policy.choose(nodes, cpu_pod)
        nodes.place(cpu_pod, chosen[name])
        for _ in range(10):
            choice = policy.choose(nodes, gpu_pod)
            if choice is not None:
                nodes.place(gpu_pod, choice)
        chosen[name + " GPUs allocated"] = nodes.allocated_gpu_milli // 1000
    assert chosen == {
        "fgd": Choice(0, ()),
        "fgd GPUs allocated": 9,
        "fgd-cpu-ratio": Choice(1, ()),
        "fgd-cpu-ratio GPUs allocated": 10,
    }


def test_unknown_policy_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="random, first-fit, best-fit, podway, fgd"):
        make_policy("tetris")
