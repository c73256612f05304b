"""The allocator's pass written in one transaction: ResourceClaims with their allocation, reservation and
owner, device rows, owners' claim statuses and events; the ledger a new leader loads; release."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from libs.cluster.generator import ClusterShape
from libs.core.dra.ledger import ClaimLedger, ClaimsRefused, DevicesReconciled
from libs.core.scheduling import SchedulerStateMachine
from libs.core.scheduling.inputs import World
from libs.db.records import ObjectDraft
from libs.db.testing import in_memory_unit_of_work_factory
from libs.events.registry import parse_payload
from services.dra_allocator import handlers
from services.dra_allocator.handlers import apply_event
from services.dra_allocator.store import load_ledger, write_outputs
from services.scheduler import store as scheduler_store
from tests.unit.scheduling.manifests import cluster, gang, pod, podgroup, stored, workload

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SHAPE = ClusterShape(blocks=1, racks_per_block=2, nodes_per_rack=2)
NUMA = "gpu.example.com/numaNode"
TWO_ON_ONE_NUMA = stored(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-numa", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}
                    ],
                    "constraints": [{"requests": ["gpus"], "matchAttribute": NUMA}],
                }
            }
        },
    }
)
CLAIMS = [
    {"name": "fabric", "resourceClaimTemplateName": "rack-fabric"},
    {"name": "gpus", "resourceClaimTemplateName": "two-numa"},
]


@pytest.fixture
async def uow_factory():
    async with in_memory_unit_of_work_factory(clock=lambda: NOW) as factory:
        yield factory


async def store(uow_factory, objects) -> None:
    async with uow_factory() as uow:
        for obj in objects:
            await uow.objects.upsert(
                ObjectDraft(
                    obj.kind,
                    "v1",
                    obj.namespace,
                    obj.name,
                    dict(obj.spec),
                    dict(obj.metadata),
                    dict(obj.status),
                    obj.uid,
                )
            )
        await uow.commit()


async def proposed(uow_factory):
    """A NUMA gang of 4 with a rack fabric, proposed by the scheduler and written as it writes it."""
    group = podgroup("g", min_count=4, claims=CLAIMS[:1])
    objects = [*cluster(SHAPE), workload(), TWO_ON_ONE_NUMA, group, *gang("g", 4, gpus=0, claims=CLAIMS)]
    await store(uow_factory, objects)
    machine = SchedulerStateMachine()
    machine.load(World(objects, {}), now=NOW.timestamp())
    async with uow_factory() as uow:
        fence = await uow.leases.acquire_or_renew("scheduler", "a", NOW, timedelta(seconds=10))
        await uow.commit()
    async with uow_factory() as uow:
        await scheduler_store.write_outputs(
            uow, machine.run_pass(NOW.timestamp()), fence=fence.fence, now=NOW
        )
        await uow.commit()
    async with uow_factory() as uow:
        events = [e.envelope for e in await uow.events.by_correlation(group.uid)]
    (proposal,) = [e for e in events if e.type == "placement.proposed"]
    return group, objects, proposal


async def allocate(uow_factory, ledger: ClaimLedger):
    outputs = ledger.run_pass()
    async with uow_factory() as uow:
        await write_outputs(uow, outputs, now=NOW)
        await uow.commit()
    return outputs


async def test_a_proposed_numa_gang_gets_its_claims_written_and_announced(uow_factory):
    group, _objects, proposal = await proposed(uow_factory)
    async with uow_factory() as uow:
        ledger = await load_ledger(uow)
    ledger.run_pass()  # the proposal found in the PodGroup's status; the event brings the same again
    ledger = ClaimLedger(inventory=ledger.inventory)
    apply_event(ledger, proposal, parse_payload(proposal))

    await allocate(uow_factory, ledger)

    async with uow_factory() as uow:
        claims = {claim.name: claim for claim in await uow.objects.find("ResourceClaim", "ml")}
        pod = await uow.objects.get("Pod", "ml", "g-0")
        stored_group = await uow.objects.get("PodGroup", "ml", "g")
        events = [e.envelope for e in await uow.events.by_correlation(group.uid)]
        fabric_holders = await uow.device_allocations.holders(
            next(iter(claims["g-fabric"].status["allocation"]["devices"]["results"]))["driver"]
            + "/"
            + claims["g-fabric"].status["allocation"]["devices"]["results"][0]["pool"]
            + "/fabric"
        )
    assert sorted(claims) == ["g-0-gpus", "g-1-gpus", "g-2-gpus", "g-3-gpus", "g-fabric"]
    gpus = claims["g-0-gpus"]
    assert gpus.spec["devices"]["constraints"] == [{"requests": ["gpus"], "matchAttribute": NUMA}]
    assert gpus.metadata["ownerReferences"][0]["uid"] == pod.uid
    assert gpus.status["reservedFor"] == [{"resource": "pods", "name": "g-0", "uid": pod.uid}]
    assert len(gpus.status["allocation"]["devices"]["results"]) == 2
    assert claims["g-fabric"].status["reservedFor"][0]["resource"] == "podgroups"
    assert pod.status["resourceClaimStatuses"] == [{"name": "gpus", "resourceClaimName": "g-0-gpus"}]
    assert stored_group.status["resourceClaimStatuses"] == [
        {"name": "fabric", "resourceClaimName": "g-fabric"}
    ]
    assert fabric_holders == ["ml/g-fabric"]
    (allocated,) = [e for e in events if e.type == "claims.allocated"]
    assert len(parse_payload(allocated).allocations) == 5
    assert allocated.causation_id == str(proposal.event_id)


async def test_a_new_leader_answers_a_waiting_placement_naming_the_proposal_it_came_from(uow_factory):
    group, _objects, proposal = await proposed(uow_factory)
    async with uow_factory() as uow:
        ledger = await load_ledger(uow)  # the placement found in the PodGroup's status, not in an event
    await allocate(uow_factory, ledger)
    async with uow_factory() as uow:
        events = [e.envelope for e in await uow.events.by_correlation(group.uid)]
    (allocated,) = [e for e in events if e.type == "claims.allocated"]
    assert allocated.causation_id == str(proposal.event_id)


async def test_a_new_leader_holds_what_was_allocated_and_refuses_it_to_others(uow_factory):
    _group, _, proposal = await proposed(uow_factory)
    async with uow_factory() as uow:
        first = await load_ledger(uow)
    await allocate(uow_factory, first)

    async with uow_factory() as uow:
        again = await load_ledger(uow)
    assert sorted(again.held) == sorted(first.held)
    apply_event(again, proposal, parse_payload(proposal))
    seen_again = again.run_pass()  # from the PodGroup's status, and from the event delivered again
    assert seen_again == []  # answered once, with the commit, before the restart
    rival = dataclasses.replace(
        handlers.proposal_of(parse_payload(proposal)), group_name="h", group_uid="other", pod_uids=("x",)
    )
    rival = dataclasses.replace(
        rival, claims=tuple(dataclasses.replace(claim, name="h-" + claim.name) for claim in rival.claims)
    )
    again.propose(rival)
    (refused,) = again.run_pass()
    assert isinstance(refused, ClaimsRefused)
    assert "is already allocated to ml/g-" in refused.reason


async def test_claims_are_released_when_the_pods_finish(uow_factory):
    _group, objects, _proposal = await proposed(uow_factory)
    async with uow_factory() as uow:
        ledger = await load_ledger(uow)
    await allocate(uow_factory, ledger)
    pods = [obj.uid for obj in objects if obj.kind == "Pod"]

    ledger.pods_ended(pods, "the-pods-succeeded")
    (released,) = await allocate(uow_factory, ledger)

    assert len(released.claims) == 5
    async with uow_factory() as uow:
        claims = await uow.objects.find("ResourceClaim", "ml")
        events = [e.envelope for e in await uow.events.by_type("claims.released")]
        holders = await uow.device_allocations.holders(released.claims[0].allocation.results[0].device.id)
        rows = await uow.device_allocations.rows()
    assert claims == [], "the claims made for the pods and their PodGroup go with them"
    assert [(e.type, e.causation_id) for e in events] == [("claims.released", "the-pods-succeeded")]
    assert holders == []
    assert rows == []


async def test_a_claim_left_by_an_earlier_pod_of_the_same_name_is_replaced(uow_factory):
    _group, objects, _proposal = await proposed(uow_factory)
    first = next(obj for obj in objects if obj.kind == "Pod" and obj.name == "g-0")
    stale = {"ownerReferences": [{"kind": "Pod", "name": "g-0", "uid": "earlier-g-0", "controller": True}]}
    async with uow_factory() as uow:
        await uow.objects.create_many(
            [ObjectDraft("ResourceClaim", "resource.k8s.io/v1", "ml", "g-0-gpus", {}, stale, {})]
        )
        await uow.commit()
    async with uow_factory() as uow:
        ledger = await load_ledger(uow)

    await allocate(uow_factory, ledger)

    async with uow_factory() as uow:
        claim = await uow.objects.get("ResourceClaim", "ml", "g-0-gpus")
    assert claim is not None
    assert claim.metadata["ownerReferences"][0]["uid"] == first.uid
    assert claim.status["reservedFor"] == [{"resource": "pods", "name": "g-0", "uid": first.uid}]
    assert claim.spec["devices"]["constraints"], "made from the template again"


async def test_a_new_leader_forgets_device_rows_of_claims_that_are_gone(uow_factory):
    """A pass that would have released a claim failed after its user deleted it: the rows stay behind. The
    next world reconciles them, and the device serves the next proposal."""
    _group, _objects, _proposal = await proposed(uow_factory)
    async with uow_factory() as uow:
        ledger = await load_ledger(uow)
    (committed,) = await allocate(uow_factory, ledger)
    taken = committed.claims[0]
    device = taken.allocation.results[0].device.id
    async with uow_factory() as uow:
        await uow.objects.delete("ResourceClaim", taken.namespace, taken.name)
        bound = await uow.objects.get("PodGroup", "ml", "g")
        assert bound is not None
        status = {k: v for k, v in bound.status.items() if k != "proposal"}  # the scheduler bound it
        await uow.objects.update_status("PodGroup", "ml", "g", status)
        await uow.commit()

    async with uow_factory() as uow:
        again = await load_ledger(uow)
    outputs = again.run_pass()
    async with uow_factory() as uow:
        await write_outputs(uow, outputs, now=NOW)
        await uow.commit()

    (reconciled,) = [output for output in outputs if isinstance(output, DevicesReconciled)]
    assert reconciled.rows == tuple(
        sorted((taken.key, result.device.id) for result in taken.allocation.results)
    )
    async with uow_factory() as uow:
        assert await uow.device_allocations.holders(device) == []
        held = {claim for claim, _, _ in await uow.device_allocations.rows()}
    assert held == {claim.key for claim in committed.claims} - {taken.key}
    async with uow_factory() as uow:
        assert (await load_ledger(uow)).run_pass() == [], "nothing left to reconcile"


async def test_releasing_a_claim_its_user_deletes_meanwhile_still_gives_its_devices_back(uow_factory):
    (a, b), ledger = await shared_claim_allocated(uow_factory)
    ledger.pods_ended([a.uid, b.uid])
    outputs = ledger.run_pass()

    async with uow_factory() as uow:
        read = uow.objects.get_many

        async def read_then_deleted(keys):
            found = await read(keys)
            await uow.objects.delete("ResourceClaim", "ml", "shared-gpu")  # its user, right after the read
            return found

        uow.objects.get_many = read_then_deleted
        await write_outputs(uow, outputs, now=NOW)
        await uow.commit()

    async with uow_factory() as uow:
        assert await uow.device_allocations.rows() == []
        events = [e.envelope.type for e in await uow.events.by_type("claims.released")]
    assert events == ["claims.released"]


SHARED_GPU = stored(
    {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "ml"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
    }
)


async def shared_claim_proposed(uow_factory):
    """Two standalone pods naming the claim `shared-gpu`, proposed by the scheduler in one pass."""
    pods = [
        pod(name, gpus=0, cpu="1", memory="1Gi", claims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}])
        for name in ("a", "b")
    ]
    objects = [*cluster(SHAPE), workload(), SHARED_GPU, *pods]
    await store(uow_factory, objects)
    machine = SchedulerStateMachine()
    machine.load(World(objects, {}), now=NOW.timestamp())
    async with uow_factory() as uow:
        fence = await uow.leases.acquire_or_renew("scheduler", "a", NOW, timedelta(seconds=10))
        await uow.commit()
    async with uow_factory() as uow:
        await scheduler_store.write_outputs(
            uow, machine.run_pass(NOW.timestamp()), fence=fence.fence, now=NOW
        )
        await uow.commit()
    proposals = []
    async with uow_factory() as uow:
        for each in pods:
            events = [e.envelope for e in await uow.events.by_correlation(each.uid)]
            proposals += [e for e in events if e.type == "placement.proposed"]
    return pods, proposals


async def shared_claim_allocated(uow_factory):
    """Both pods' proposals taken in by a new ledger and `shared-gpu` allocated for them; the pods and the
    ledger."""
    pods, proposals = await shared_claim_proposed(uow_factory)
    async with uow_factory() as uow:
        ledger = await load_ledger(uow)
    for proposal in proposals:
        apply_event(ledger, proposal, parse_payload(proposal))
    await allocate(uow_factory, ledger)
    return pods, ledger


async def reserved_for(uow_factory) -> tuple[dict, list[str]]:
    async with uow_factory() as uow:
        claim = await uow.objects.get("ResourceClaim", "ml", "shared-gpu")
    assert claim is not None
    return claim.status, sorted(entry["name"] for entry in claim.status.get("reservedFor") or [])


async def test_a_claim_pods_name_is_allocated_once_reserved_for_both_and_released_after_both(uow_factory):
    (a, b), ledger = await shared_claim_allocated(uow_factory)

    status, names = await reserved_for(uow_factory)
    assert names == ["a", "b"]
    (result,) = status["allocation"]["devices"]["results"]
    device = f"{result['driver']}/{result['pool']}/{result['device']}"
    async with uow_factory() as uow:
        assert await uow.device_allocations.holders(device) == ["ml/shared-gpu"]
        pod_a = await uow.objects.get("Pod", "ml", "a")
    assert pod_a is not None
    assert "resourceClaimStatuses" not in pod_a.status  # the pod names it: it was not made for it

    async with uow_factory() as uow:
        ledger = await load_ledger(uow)  # a new leader
    assert [pod.name for pod in ledger.held["ml/shared-gpu"].reserved_for] == ["a", "b"]
    ledger.pods_ended([a.uid])
    await allocate(uow_factory, ledger)
    assert (await reserved_for(uow_factory))[1] == ["b"]

    ledger.pods_ended([b.uid])
    await allocate(uow_factory, ledger)

    status, names = await reserved_for(uow_factory)
    assert status == {}
    async with uow_factory() as uow:
        assert await uow.device_allocations.holders(device) == []
        claim = await uow.objects.get("ResourceClaim", "ml", "shared-gpu")
    assert claim is not None
    assert claim.spec == SHARED_GPU.spec


async def test_a_claim_pods_name_that_its_user_deleted_is_not_made_again(uow_factory):
    (a, _), ledger = await shared_claim_allocated(uow_factory)
    async with uow_factory() as uow:
        await uow.objects.delete("ResourceClaim", "ml", "shared-gpu")
        await uow.commit()

    ledger.pods_ended([a.uid])
    await allocate(uow_factory, ledger)

    async with uow_factory() as uow:
        assert await uow.objects.get("ResourceClaim", "ml", "shared-gpu") is None


async def test_a_new_leader_deletes_claims_left_empty_by_owners_that_are_gone(uow_factory):
    (a, _b), _proposals = await shared_claim_proposed(uow_factory)
    owned_by_a = {"ownerReferences": [{"kind": "Pod", "name": "a", "uid": a.uid, "controller": True}]}
    owned_by_gone = {"ownerReferences": [{"kind": "Pod", "name": "z", "uid": "gone", "controller": True}]}
    async with uow_factory() as uow:
        await uow.objects.create_many(
            [
                ObjectDraft("ResourceClaim", "resource.k8s.io/v1", "ml", "a-gpu", {}, owned_by_a, {}),
                ObjectDraft("ResourceClaim", "resource.k8s.io/v1", "ml", "z-gpu", {}, owned_by_gone, {}),
            ]
        )
        await uow.commit()
    async with uow_factory() as uow:
        ledger = await load_ledger(uow)

    await allocate(uow_factory, ledger)

    async with uow_factory() as uow:
        names = sorted(claim.name for claim in await uow.objects.find("ResourceClaim", "ml"))
    assert names == ["a-gpu", "shared-gpu"], "the live pod's claim and the claim pods name stay"
