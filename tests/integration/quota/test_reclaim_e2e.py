"""Quotas end to end on a real nats-server and database (SQLite and PostgreSQL): admission, scheduler,
preemptor and node agent on the 64-node cluster of cluster-small.yaml (512 GPUs), shared by the two teams of
deploy/examples/11-two-teams.yaml. Team llm borrows all vision lends; vision takes its share back."""

from __future__ import annotations

from libs.core.invariants.quotas import gangs_hold_their_quota, queues_within_their_limits, quota_holdings
from libs.db.run_records import load_records
from tests.integration.quota.teams import Teams, gang, phase
from tests.support import eventually

LLM_GANGS = [f"llm-{i}" for i in range(7)]
"""7 gangs of 64 GPUs: llm's 320 nominal and the 128 vision lends, every GPU the cohort lets it use."""
NOT_ENOUGH = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200"
)


async def test_vision_reclaims_what_llm_borrowed_and_only_a_borrowed_gang_is_evicted(
    teams: Teams, database_url: str
) -> None:
    # 1. llm fills what the cohort lets it use with low-priority gangs; one more waits for quota, saying why.
    for name in LLM_GANGS:
        await teams.client.apply(gang(name, "llm", 8, "batch"))
    for name in LLM_GANGS:
        await teams.running("llm", name, 8)
    await teams.client.apply(gang("llm-extra", "llm", 8, "batch"))
    waiting = await eventually(
        lambda: teams.conditions("llm", "llm-extra"), lambda found: "QuotaReserved" in found, timeout_s=30
    )
    assert waiting["QuotaReserved"]["status"] == "False"
    assert waiting["QuotaReserved"]["reason"] == "Pending"
    assert waiting["QuotaReserved"]["message"].startswith(NOT_ENOUGH)
    assert waiting["PodGroupScheduled"]["reason"] == "SchedulingGated"
    assert "waiting for quota in ClusterQueue team-llm" in waiting["PodGroupScheduled"]["message"]
    running = {name: {p["metadata"]["uid"] for p in await teams.pods("llm", name)} for name in LLM_GANGS}

    # 2. vision asks for 128 GPUs within its nominal quota: 64 are its own, 64 llm borrowed.
    await teams.client.apply(gang("vision-train", "vision", 16, "high-priority"))

    # 3. vision's gang binds; exactly one llm gang was evicted, whole: 64 of the GPUs llm borrowed are enough
    # (which one: the most recently admitted, then the first name; creation times are in seconds here).
    await teams.running("vision", "vision-train", 16)
    reserved = await eventually(
        lambda: teams.conditions("vision", "vision-train"),
        lambda found: found.get("QuotaReserved", {}).get("status") == "True",
        timeout_s=30,
    )
    assert reserved["QuotaReserved"]["status"] == "True"
    assert reserved["QuotaReserved"]["message"] == "Quota reserved in ClusterQueue team-vision"
    evicted = []
    for name in LLM_GANGS:
        phases = {phase(p) for p in await teams.pods("llm", name) if p["metadata"]["uid"] in running[name]}
        if phases != {"Running"}:
            evicted.append(name)
    assert len(evicted) == 1
    (group,) = await teams.client.get("PodGroup", evicted[0], namespace="llm")
    story = await eventually(
        lambda: teams.story(group["metadata"]["uid"]),
        lambda events: any(e["type"] == "pods.evicted" for e in events),
        timeout_s=30,
    )
    (eviction,) = [e for e in story if e["type"] == "pods.evicted"]
    assert eviction["payload"]["message"].startswith("Preempted to accommodate a workload (UID: ")
    assert eviction["payload"]["message"].endswith("due to reclamation within the cohort")
    assert len(eviction["payload"]["pods"]) == 8
    assert not any(phase(p) == "Running" for p in await teams.pods("llm", "llm-extra"))

    # 4. podway check's quota promises hold over what the run stored.
    records = await load_records(database_url)
    holds = {binding.pod_uid: binding.node_name for binding in records.bindings}
    ledger, holdings, labels = quota_holdings(records.objects, holds)
    keys = {holding.key for holding in holdings}
    assert "vision/vision-train" in keys
    assert len({key for key in keys if key.startswith("llm/")}) >= len(LLM_GANGS) - 1
    assert queues_within_their_limits(ledger, holdings, labels) == []
    assert gangs_hold_their_quota(ledger, holdings, labels) == []


async def test_two_gangs_reclaiming_at_once_each_get_the_quota_they_reclaim(teams: Teams) -> None:
    """The second reclaim is answered while the first reclaiming gang is not bound yet: it must evict a
    gang of its own rather than be told the room the first freed is its, and then wait for ever."""
    for name in LLM_GANGS:
        await teams.client.apply(gang(name, "llm", 8, "batch"))
    for name in LLM_GANGS:
        await teams.running("llm", name, 8)
    await teams.client.apply(gang("vision-first", "vision", 8, "high-priority"))  # the 64 GPUs left idle
    await teams.running("vision", "vision-first", 8)

    await teams.client.apply(
        [*gang("vision-a", "vision", 8, "high-priority"), *gang("vision-b", "vision", 8, "high-priority")]
    )

    await teams.running("vision", "vision-a", 8)
    await teams.running("vision", "vision-b", 8)
    still_running = [
        name for name in LLM_GANGS if {phase(p) for p in await teams.pods("llm", name)} == {"Running"}
    ]
    assert len(still_running) == len(LLM_GANGS) - 2
