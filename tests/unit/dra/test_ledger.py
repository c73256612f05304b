"""The allocator's ledger: proposals committed whole or refused whole, claims released with their pods."""

from __future__ import annotations

import dataclasses

from libs.core.dra import DeviceClassInfo
from libs.core.dra.ledger import (
    ClaimLedger,
    ClaimOwner,
    ClaimsCommitted,
    ClaimsRefused,
    ClaimsReleased,
    DeviceRow,
    DevicesReconciled,
    Proposal,
    ProposedClaim,
    ReservationsEnded,
)

from .builders import fabric_slice, gpu, node_slice


def ledger() -> ClaimLedger:
    found = ClaimLedger()
    found.inventory.put_class(DeviceClassInfo("gpu.example.com", (), None))
    found.inventory.put_slice("a", node_slice("a", [gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-7", shared=True)]))
    found.inventory.put_slice("r1", fabric_slice("r1"))
    return found


def device(name: str, *, pool: str = "a", driver: str = "gpu.example.com", **extra):
    return {"request": "gpus", "driver": driver, "pool": pool, "device": name, **extra}


def proposal(group: str, pods: dict[str, list[dict]], group_devices: list[dict] | None = None) -> Proposal:
    claims = [
        ProposedClaim(f"{pod}-gpus", "gpus", ClaimOwner("Pod", pod, f"uid-{pod}"), tuple(devices))
        for pod, devices in pods.items()
    ]
    if group_devices:
        claims.append(
            ProposedClaim(
                f"{group}-fabric",
                "fabric",
                ClaimOwner("PodGroup", group, f"uid-{group}"),
                tuple(group_devices),
            )
        )
    return Proposal("ml", group, f"uid-{group}", tuple(f"uid-{pod}" for pod in pods), tuple(claims))


def test_a_proposal_on_free_devices_is_committed():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-0")], "p1": [device("gpu-1")]}))

    (committed,) = book.run_pass()

    assert isinstance(committed, ClaimsCommitted)
    assert [claim.name for claim in committed.claims] == ["p0-gpus", "p1-gpus"]
    assert book.usage.holders == {
        "gpu.example.com/a/gpu-0": "ml/p0-gpus",
        "gpu.example.com/a/gpu-1": "ml/p1-gpus",
    }


def test_a_proposal_naming_a_held_device_is_refused_whole():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-0")]}))
    book.propose(proposal("h", {"q0": [device("gpu-1")], "q1": [device("gpu-0")]}))

    first, second = book.run_pass()

    assert isinstance(first, ClaimsCommitted)
    assert isinstance(second, ClaimsRefused)
    assert second.reason == "device gpu.example.com/a/gpu-0 is already allocated to ml/p0-gpus"
    assert "gpu.example.com/a/gpu-1" not in book.usage.holders


def test_shares_beyond_a_devices_capacity_are_refused():
    book = ledger()
    share = {"consumedCapacity": {"gpu.example.com/cores": "600m", "gpu.example.com/memory": "0"}}
    book.propose(proposal("g", {"p0": [device("gpu-7", **share)]}))
    book.propose(proposal("h", {"q0": [device("gpu-7", **share)]}))

    first, second = book.run_pass()

    assert isinstance(first, ClaimsCommitted)
    assert isinstance(second, ClaimsRefused)
    assert second.reason == "device gpu.example.com/a/gpu-7 has not enough capacity left"


def test_a_device_no_longer_published_is_refused():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-9")]}))

    (refused,) = book.run_pass()

    assert isinstance(refused, ClaimsRefused)
    assert "no longer published" in refused.reason


def test_a_proposal_for_a_pod_that_ended_is_refused():
    book = ledger()
    book.pods_ended(["uid-p0"])
    book.propose(proposal("g", {"p0": [device("gpu-0")]}))

    (refused,) = book.run_pass()

    assert isinstance(refused, ClaimsRefused)


def test_a_pods_claim_is_released_when_it_ends_and_the_groups_when_all_have():
    book = ledger()
    fabric = [device("fabric", driver="fabric.example.com", pool="rack-r1", consumedCapacity={})]
    book.propose(proposal("g", {"p0": [device("gpu-0")], "p1": [device("gpu-1")]}, fabric))
    book.run_pass()

    book.pods_ended(["uid-p0"])
    (released,) = book.run_pass()
    assert isinstance(released, ClaimsReleased)
    assert [claim.name for claim in released.claims] == ["p0-gpus"]
    assert set(book.held) == {"ml/p1-gpus", "ml/g-fabric"}

    book.pods_ended(["uid-p1"])
    (released,) = book.run_pass()
    assert sorted(claim.name for claim in released.claims) == ["g-fabric", "p1-gpus"]
    assert not book.held
    assert not book.usage.holders
    assert not book.usage.shares


def test_a_deleted_podgroup_releases_every_claim_it_came_with():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-0")]}))
    book.run_pass()

    book.group_deleted("uid-g")

    (released,) = book.run_pass()
    assert [claim.name for claim in released.claims] == ["p0-gpus"]


def test_a_placement_seen_twice_is_committed_and_answered_once():
    book = ledger()
    placed = dataclasses.replace(proposal("g", {"p0": [device("gpu-0")]}), proposed_at="t1")
    book.propose(placed)
    book.propose(placed)  # its event delivered again, or its status read by a new leader

    (first,) = book.run_pass()

    assert isinstance(first, ClaimsCommitted)
    assert [claim.proposed_at for claim in first.claims] == ["t1"]


def test_a_new_leader_does_not_answer_again_a_placement_whose_claims_it_finds_committed_for_it():
    book = ledger()
    placed = dataclasses.replace(proposal("g", {"p0": [device("gpu-0")]}), proposed_at="t1")
    book.propose(placed)
    (committed,) = book.run_pass()

    successor = ledger()
    for claim in committed.claims:
        successor.restore(claim, ["uid-p0"])
    successor.propose(placed)

    assert successor.run_pass() == []


def test_the_same_devices_proposed_for_a_new_placement_are_answered_again():
    book = ledger()
    book.propose(dataclasses.replace(proposal("g", {"p0": [device("gpu-0")]}), proposed_at="t1"))
    book.run_pass()
    # The scheduler gave up waiting and placed the gang again, on the same devices.
    book.propose(dataclasses.replace(proposal("g", {"p0": [device("gpu-0")]}), proposed_at="t2"))

    (again,) = book.run_pass()

    assert isinstance(again, ClaimsCommitted)
    assert again.claims == ()
    assert [claim.proposed_at for claim in again.kept] == ["t2"]


def test_a_claim_proposed_again_for_the_same_pod_gets_the_new_devices():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-0")]}))
    book.run_pass()
    book.propose(proposal("g", {"p0": [device("gpu-1")]}))

    (again,) = book.run_pass()

    assert isinstance(again, ClaimsCommitted)
    assert [claim.allocation.results[0].device.name for claim in again.replaced] == ["gpu-0"]
    assert book.usage.holders == {"gpu.example.com/a/gpu-1": "ml/p0-gpus"}


def test_a_claim_of_another_owner_is_not_taken_over():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-0")]}))
    book.run_pass()
    other = proposal("g", {"p0": [device("gpu-1")]})
    book.propose(
        dataclasses.replace(
            other, claims=(dataclasses.replace(other.claims[0], owner=ClaimOwner("Pod", "p0", "new-uid")),)
        )
    )

    (refused,) = book.run_pass()

    assert isinstance(refused, ClaimsRefused)
    assert "belongs to another owner" in refused.reason


# -- existing ResourceClaims pods name ------------------------------------------------------------------------


def sharing(pod: str, devices: list[dict]) -> Proposal:
    """A standalone pod proposed with the existing claim `shared-gpu` it names."""
    owner = ClaimOwner("Pod", pod, f"uid-{pod}")
    claim = ProposedClaim("shared-gpu", "gpu", owner, tuple(devices), shared=True)
    return Proposal("ml", f"pod/{pod}", f"uid-{pod}", (f"uid-{pod}",), (claim,))


def test_the_first_pod_naming_a_claim_allocates_it_and_reserves_it():
    book = ledger()
    book.propose(sharing("a", [device("gpu-0")]))

    (committed,) = book.run_pass()

    assert isinstance(committed, ClaimsCommitted)
    (claim,) = committed.claims
    assert claim.key == "ml/shared-gpu"
    assert [pod.name for pod in claim.reserved_for] == ["a"]
    assert book.usage.holders == {"gpu.example.com/a/gpu-0": "ml/shared-gpu"}


def test_later_pods_join_the_allocated_claim_and_take_nothing_new():
    book = ledger()
    book.propose(sharing("a", [device("gpu-0")]))
    book.propose(sharing("b", []))
    book.propose(sharing("c", [device("gpu-0")]))

    _first, second, third = book.run_pass()

    assert isinstance(second, ClaimsCommitted)
    assert isinstance(third, ClaimsCommitted)
    assert second.claims == ()
    assert third.claims == ()
    (joined,) = third.joined
    assert [pod.name for pod in joined.reserved_for] == ["a", "b", "c"]
    assert book.usage.holders == {"gpu.example.com/a/gpu-0": "ml/shared-gpu"}


def test_a_pod_joining_a_claim_that_is_not_allocated_or_on_other_devices_is_refused():
    book = ledger()
    book.propose(sharing("b", []))
    book.propose(sharing("a", [device("gpu-0")]))
    book.propose(sharing("c", [device("gpu-1")]))

    unallocated, committed, elsewhere = book.run_pass()

    assert isinstance(unallocated, ClaimsRefused)
    assert unallocated.reason == "ResourceClaim shared-gpu is not allocated"
    assert isinstance(committed, ClaimsCommitted)
    assert isinstance(elsewhere, ClaimsRefused)
    assert elsewhere.reason == "ResourceClaim shared-gpu is allocated other devices"


def test_the_claim_is_released_when_the_last_pod_reserving_it_ends():
    book = ledger()
    book.propose(sharing("a", [device("gpu-0")]))
    book.propose(sharing("b", []))
    book.run_pass()

    book.pods_ended(["uid-a"])
    (still,) = book.run_pass()

    assert isinstance(still, ReservationsEnded)
    assert [pod.name for pod in still.claims[0].reserved_for] == ["b"]
    assert "ml/shared-gpu" in book.held

    book.pods_ended(["uid-b"])
    (released,) = book.run_pass()

    assert isinstance(released, ClaimsReleased)
    assert [claim.name for claim in released.claims] == ["shared-gpu"]
    assert book.usage.holders == {}
    assert book.held == {}


def test_pods_of_one_proposal_naming_one_claim_allocate_it_once():
    book = ledger()
    owners = [ClaimOwner("Pod", pod, f"uid-{pod}") for pod in ("a", "b")]
    claims = (
        ProposedClaim("shared-gpu", "gpu", owners[0], (device("gpu-0"),), shared=True),
        ProposedClaim("shared-gpu", "gpu", owners[1], (), shared=True),
    )
    book.propose(Proposal("ml", "g", "uid-g", ("uid-a", "uid-b"), claims))

    (committed,) = book.run_pass()

    assert isinstance(committed, ClaimsCommitted)
    (claim,) = committed.claims
    assert [pod.name for pod in claim.reserved_for] == ["a", "b"]
    assert book.usage.holders == {"gpu.example.com/a/gpu-0": "ml/shared-gpu"}


def test_device_rows_of_claims_not_held_are_reconciled_first_and_shares_set_to_what_is_held():
    book = ledger()
    share = {"consumedCapacity": {"gpu.example.com/cores": "300m", "gpu.example.com/memory": "0"}}
    book.propose(proposal("g", {"p0": [device("gpu-7", **share)]}))
    (committed,) = book.run_pass()
    assert isinstance(committed, ClaimsCommitted)
    shared = "gpu.example.com/a/gpu-7"
    rows = [
        DeviceRow("ml/p0-gpus", shared, exclusive=False),
        DeviceRow("ml/gone-gpus", shared, exclusive=False),  # its claim was deleted; its share stayed
        DeviceRow("ml/gone-gpus", "gpu.example.com/a/gpu-0", exclusive=True),
        DeviceRow("ml/p0-gpus", "gpu.example.com/a/gpu-1", exclusive=True),  # of an earlier p0-gpus
    ]

    book.reconcile(rows)
    book.propose(proposal("h", {"q0": [device("gpu-0")]}))
    reconciled, *decided = book.run_pass()

    assert reconciled == DevicesReconciled(
        (
            ("ml/gone-gpus", "gpu.example.com/a/gpu-0"),
            ("ml/gone-gpus", shared),
            ("ml/p0-gpus", "gpu.example.com/a/gpu-1"),
        ),
        ((shared, "gpu.example.com/cores", 300), (shared, "gpu.example.com/memory", 0)),
    )
    assert [type(output) for output in decided] == [ClaimsCommitted]
    assert book.run_pass() == [], "reported once"


def test_rows_of_held_claims_need_no_reconciling():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-0")]}))
    book.run_pass()

    book.reconcile([DeviceRow("ml/p0-gpus", "gpu.example.com/a/gpu-0", exclusive=True)])

    assert book.run_pass() == []


def test_proposals_of_a_pass_that_was_not_written_are_decided_again_once():
    book = ledger()
    book.propose(proposal("g", {"p0": [device("gpu-0")]}))
    book.propose(proposal("h", {"q0": [device("gpu-0")]}))
    lost = book.run_pass()  # committed for g, refused for h: neither reached the database

    again = ledger()  # the world read again
    again.propose(proposal("g", {"p0": [device("gpu-0")]}))  # g's, found again in its PodGroup's status
    again.propose_lost(lost)
    decided = again.run_pass()

    assert [(type(output), output.proposal.group_name) for output in decided] == [
        (ClaimsCommitted, "g"),
        (ClaimsRefused, "h"),
    ]
