"""What `get` says of a pod's node: what is bound, never what its spec was edited to say."""

from __future__ import annotations

from datetime import timedelta

from libs.db.records import ObjectDraft, PodBinding
from libs.db.testing import in_memory_unit_of_work_factory
from libs.events.rpc import GetRequest
from services.admission.queries import get_objects
from tests.conftest import FakeClock


def pod(name: str, spec_node: str | None = None) -> ObjectDraft:
    spec = {"containers": [{"name": "c"}], **({"nodeName": spec_node} if spec_node else {})}
    metadata = {"name": name, "namespace": "ml"}
    return ObjectDraft("Pod", "v1", "ml", name, spec, metadata, {"phase": "Pending"}, f"uid-{name}")


async def test_a_pod_shows_the_node_it_is_bound_to_and_an_unbound_one_holds_none(
    fake_clock: FakeClock,
) -> None:
    async with in_memory_unit_of_work_factory(clock=fake_clock) as uow_factory:
        async with uow_factory() as uow:
            await uow.objects.upsert(pod("bound", spec_node="edited"))
            await uow.objects.upsert(pod("unbound", spec_node="wished"))
            lease = await uow.leases.acquire_or_renew("scheduler", "s", fake_clock(), timedelta(seconds=10))
            assert lease is not None
            await uow.bindings.bind(PodBinding("uid-bound", "n1", None, fake_clock()), fence=lease.fence)
            await uow.commit()
        async with uow_factory() as uow:
            reply = await get_objects(uow, GetRequest(kind="Pod", namespace="ml"))
    shown = {
        p["metadata"]["name"]: (p["spec"].get("nodeName"), p["status"].get("podway")) for p in reply.items
    }
    assert shown == {"bound": ("n1", {"nodeName": "n1"}), "unbound": ("wished", None)}
