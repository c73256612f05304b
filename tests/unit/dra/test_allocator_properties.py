"""Invariants of the allocator under random claim sequences: no exclusive device is allocated twice, no
shareable device gives more than it has, and every allocation keeps its own constraints."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from libs.core.dra import ClaimAllocation, DeviceUsage, allocate

from .builders import claim, exactly, gpu, inventory, node_slice

NODES = ("a", "b")
INVENTORY = inventory(
    {
        node: node_slice(
            node,
            [gpu(f"gpu-{i}", numa=i // 2, pcie=f"pci{i % 3}") for i in range(4)]
            + [gpu(f"shared-{i}", shared=True, numa=i) for i in range(2)],
        )
        for node in NODES
    }
)

asks = st.one_of(
    st.builds(lambda count: exactly(count=count), st.integers(1, 3)),
    st.builds(lambda milli: exactly(capacity={"cores": f"{milli}m"}), st.integers(1, 1000)),
    st.builds(
        lambda milli, gib: exactly(capacity={"cores": f"{milli}m", "memory": f"{gib}Gi"}),
        st.integers(1, 1000),
        st.integers(1, 160),
    ),
)
constraints = st.sampled_from(
    [
        [],
        [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/numaNode"}],
        [{"requests": ["gpus"], "distinctAttribute": "gpu.example.com/pcieRoot"}],
    ]
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("allocate"), asks, constraints, st.sampled_from(NODES)),
        st.tuples(st.just("release"), st.integers(0, 50)),
    ),
    max_size=40,
)


def check(live: dict[str, ClaimAllocation]) -> None:
    exclusive: set[str] = set()
    consumed: dict[str, dict[str, int]] = {}
    for allocation in live.values():
        for result in allocation.results:
            device = result.device
            if result.consumed is None:
                assert device.id not in exclusive, f"{device.id} allocated twice"
                assert device.id not in consumed
                exclusive.add(device.id)
            else:
                assert device.id not in exclusive
                total = consumed.setdefault(device.id, {})
                for name, amount in result.consumed.items():
                    total[name] = total.get(name, 0) + amount
                    assert total[name] <= device.capacity[name], f"{device.id} {name} over capacity"


def keeps_constraints(allocation: ClaimAllocation, constraint: list[dict[str, str]]) -> bool:
    if not constraint:
        return True
    attribute = constraint[0].get("matchAttribute") or constraint[0]["distinctAttribute"]
    values = [result.device.attributes[attribute] for result in allocation.results]
    return len(set(values)) == 1 if "matchAttribute" in constraint[0] else len(set(values)) == len(values)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_random_claim_sequences_never_double_allocate_or_exceed_capacity(sequence):
    usage = DeviceUsage()
    live: dict[str, ClaimAllocation] = {}
    for number, step in enumerate(sequence):
        if step[0] == "release":
            if live:
                key = sorted(live)[step[1] % len(live)]
                usage.release(live.pop(key))
            continue
        _, ask, constraint, node = step
        found = allocate([claim(f"c{number}", ask, constraints=constraint)], node, INVENTORY, usage)
        if found is None:
            continue
        assert keeps_constraints(found[0], constraint)
        assert usage.check(found) is None
        usage.take(found[0])
        live[found[0].claim] = found[0]
        check(live)
    for allocation in list(live.values()):
        usage.release(allocation)
    assert not usage.holders
    assert not usage.consumed
    assert not usage.shares
