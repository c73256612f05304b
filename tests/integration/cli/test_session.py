"""A user's session with the `podway` CLI against a running stack: apply, get, describe, events and delete,
with kubectl's exit codes and output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.cli.conftest import EXAMPLES, podway_on
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.support import eventually

# What the CLI prints does not depend on the database: one real one is enough.
pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


def running(count: int):
    return lambda pods: (
        len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
    )


def write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


async def test_a_job_applied_read_and_deleted_with_the_cli(stack: Stack, nats_url: str):
    job = str(EXAMPLES / "05-indexed-job.yaml")

    applied = await podway_on(nats_url, "apply", "-f", str(EXAMPLES / "01-priorityclasses.yaml"))
    assert (applied.code, applied.out.splitlines()) == (
        0,
        ["priorityclass/high-priority unchanged", "priorityclass/batch unchanged"],
    )
    applied = await podway_on(nats_url, "apply", "-f", job)
    assert (applied.code, applied.out.strip()) == (0, "job/finetune created")
    await eventually(lambda: stack.client.get("Pod", namespace=NAMESPACE), running(8), timeout_s=30)

    pods = await podway_on(nats_url, "get", "pods", "-n", NAMESPACE, "-o", "wide")
    assert pods.code == 0
    header, *rows = pods.out.splitlines()
    assert header.split()[:5] == ["NAME", "STATUS", "PODGROUP", "NODE", "AGE"]
    assert "WAITING" in header
    assert len(rows) == 8
    assert all(row.split()[1] == "Running" and row.split()[3].startswith("zone-0-") for row in rows)

    groups = await podway_on(nats_url, "get", "podgroups", "-n", NAMESPACE)
    assert groups.out.splitlines()[1].split()[:4] == ["finetune-worker-0", "Running", "gang", "8/8"]

    described = await podway_on(nats_url, "describe", "podgroup", "finetune-worker-0", "-n", NAMESPACE)
    assert described.code == 0
    conditions = described.out.split("Conditions:")[1].split("Events:")[0]
    shown = [line.split()[:3] for line in conditions.splitlines()]
    assert ["PodGroupScheduled", "True", "Scheduled"] in shown
    assert ["PodGroupInitiallyScheduled", "True", "Scheduled"] in shown
    assert "pods.bound" in described.out.split("Events:")[1]

    story = await podway_on(nats_url, "events", "--podgroup", f"{NAMESPACE}/finetune-worker-0")
    assert story.code == 0
    assert [t for t in ("podgroup.admitted", "pods.bound", "pods.running") if t not in story.out] == []

    deleted = await podway_on(nats_url, "delete", "-f", job)
    assert (deleted.code, deleted.out.strip(), deleted.err) == (0, 'job.batch "finetune" deleted', "")

    for kind in ("job", "podgroup", "workload"):
        gone = await podway_on(
            nats_url, "get", kind, "finetune-worker-0" if kind == "podgroup" else "finetune"
        )
        assert gone.code == 1
        assert "(NotFound)" in gone.err
    assert await stack.client.get("Pod", namespace=NAMESPACE) == []

    again = await podway_on(nats_url, "apply", "-f", job)
    assert (again.code, again.out.strip()) == (0, "job/finetune created")


async def test_the_cli_shows_why_pods_wait_and_refuses_bad_input_with_exit_1(
    stack: Stack, nats_url: str, tmp_path: Path
):
    orphan = write(tmp_path, "orphan.yaml", [pod("orphan", group="nowhere")])
    applied = await podway_on(nats_url, "apply", "-f", orphan)
    assert (applied.code, applied.out.strip()) == (0, "pod/orphan created")

    wide = await podway_on(nats_url, "get", "pod", "orphan", "-n", NAMESPACE, "-o", "wide")
    assert "SchedulingGated: waiting for PodGroup ml/nowhere, which does not exist" in wide.out
    described = await podway_on(nats_url, "describe", "pod", "orphan", "-n", NAMESPACE)
    assert "PodScheduled" in described.out
    assert "waiting for PodGroup ml/nowhere, which does not exist" in described.out

    _, group, *_ = gang("unreferenced", 2)
    refused = await podway_on(nats_url, "apply", "-f", write(tmp_path, "group.yaml", [group]))
    assert refused.code == 1
    assert refused.err.splitlines() == [
        'The PodGroup "unreferenced" is invalid:',
        '* spec.podGroupTemplateRef.workload.workloadName: Not found: "unreferenced"',
    ]

    invalid = await podway_on(nats_url, "apply", "-f", str(EXAMPLES / "invalid" / "bad-workload.yaml"))
    assert invalid.code == 1
    assert invalid.err.startswith('The Workload "BAD_NAME" is invalid:\n* ')
    assert invalid.err.count("\n* ") == 5

    missing = await podway_on(nats_url, "delete", "pod", "ghost", "-n", NAMESPACE)
    assert (missing.code, missing.err.strip()) == (1, 'Error from server (NotFound): pods "ghost" not found')
    unknown = await podway_on(nats_url, "get", "pod", "ghost", "-n", NAMESPACE)
    assert unknown.code == 1
    assert 'Error from server (NotFound): pod "ghost" not found' in unknown.err


async def test_delete_waits_only_as_long_as_it_is_told(stack: Stack, nats_url: str):
    # The node agent's clock stands still: these pods run until evicted, so their PodGroup stays.
    await stack.client.apply(gang("steady", 2))
    await eventually(lambda: stack.client.get("Pod", namespace=NAMESPACE), running(2), timeout_s=30)

    timed_out = await podway_on(nats_url, "delete", "podgroup", "steady", "-n", NAMESPACE, "--timeout=0s")

    assert timed_out.code == 1
    assert timed_out.out.strip() == 'podgroup.scheduling.k8s.io "steady" deleted'
    assert timed_out.err.strip() == "error: timed out waiting for the condition on podgroups/steady"

    at_once = await podway_on(nats_url, "delete", "podgroup", "steady", "-n", NAMESPACE, "--wait=false")

    assert (at_once.code, at_once.err) == (0, "")
    (group,) = await stack.client.get("PodGroup", "steady", NAMESPACE)
    assert "deletionTimestamp" in group["metadata"]


async def test_deleting_a_namespace_with_the_cli_deletes_what_is_in_it(stack: Stack, nats_url: str):
    await stack.client.apply(gang("doomed", 2))
    await eventually(lambda: stack.client.get("Pod", namespace=NAMESPACE), running(2), timeout_s=30)

    listed = await podway_on(nats_url, "get", "ns")
    assert listed.out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert [NAMESPACE, "Active"] in [row.split()[:2] for row in listed.out.splitlines()]

    deleted = await podway_on(nats_url, "delete", "namespace", NAMESPACE)

    assert (deleted.code, deleted.out.strip()) == (0, f'namespace "{NAMESPACE}" deleted')
    # The running pods are evicted and stopped by their node agent; their PodGroup and Workload follow.
    for kind in ("Pod", "PodGroup", "Workload"):
        await eventually(
            lambda kind=kind: stack.client.get(kind, namespace=NAMESPACE), lambda found: found == []
        )
    listed = await podway_on(nats_url, "get", "namespaces")
    assert NAMESPACE not in [row.split()[0] for row in listed.out.splitlines()]
