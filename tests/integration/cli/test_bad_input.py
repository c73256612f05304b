"""Bad input gets the answer kubectl gives, through the `podway` CLI against a running stack: unknown fields
(strict by default, or warned about), one answer per object of a file, Pod spec updates refused, and Jobs
submitted as events followed to their outcome."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from libs.api.manifests import load_documents
from tests.integration.cli.conftest import EXAMPLES, ROOT, Run, podway_on
from tests.integration.scheduler.conftest import Stack
from tests.integration.scheduler.manifests import NAMESPACE, gang, pod
from tests.support import eventually

pytestmark = pytest.mark.parametrize(
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)

MISSPELT = (
    'Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field "spec.paralelism"'
)


def write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def misspelt_job(name: str = "typo") -> dict[str, Any]:
    (job,) = load_documents((EXAMPLES / "05-indexed-job.yaml").read_text())
    job["metadata"]["name"] = name
    job["spec"]["paralelism"] = job["spec"].pop("parallelism")
    return job


async def test_apply_refuses_unknown_fields_by_default_and_warns_with_validate_warn(
    stack: Stack, nats_url: str, tmp_path: Path
):
    path = write(tmp_path, "job.yaml", [misspelt_job()])

    strict = await podway_on(nats_url, "apply", "-f", path)

    assert (strict.code, strict.err.strip()) == (1, MISSPELT)
    assert await stack.client.get("Job", "typo", NAMESPACE) == []

    warned = await podway_on(nats_url, "apply", "-f", path, "--validate=warn")

    assert (warned.code, warned.out.strip()) == (0, "job/typo created")
    assert warned.err.strip() == 'Warning: unknown field "spec.paralelism"'


async def test_each_object_of_a_file_gets_its_own_answer_and_one_refusal_fails_the_command(
    stack: Stack, nats_url: str, tmp_path: Path
):
    path = write(tmp_path, "mixed.yaml", [misspelt_job(), pod("lone")])

    applied = await podway_on(nats_url, "apply", "-f", path)

    assert applied.code == 1
    assert applied.out.strip() == "pod/lone created"
    assert applied.err.strip() == MISSPELT
    assert len(await stack.client.get("Pod", "lone", NAMESPACE)) == 1


async def test_changing_a_pods_requests_is_forbidden_as_the_api_server_forbids_it(
    stack: Stack, nats_url: str, tmp_path: Path
):
    created = await podway_on(nats_url, "apply", "-f", write(tmp_path, "a.yaml", [pod("steady")]))
    assert (created.code, created.out.strip()) == (0, "pod/steady created")

    bigger = await podway_on(nats_url, "apply", "-f", write(tmp_path, "b.yaml", [pod("steady", gpus=2)]))

    assert bigger.code == 1
    assert bigger.err.splitlines() == [
        'The Pod "steady" is invalid:',
        "* spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
        "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
        "previously negative)",
    ]
    (stored,) = await stack.client.get("Pod", "steady", NAMESPACE)
    assert stored["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"

    labelled = pod("steady")
    labelled["metadata"]["labels"] = {"team": "ml"}
    relabelled = await podway_on(nats_url, "apply", "-f", write(tmp_path, "c.yaml", [labelled]))

    assert (relabelled.code, relabelled.out.strip()) == (0, "pod/steady configured")


async def test_submit_refuses_a_malformed_job_before_publishing_anything(
    stack: Stack, nats_url: str, tmp_path: Path
):
    (good,) = load_documents((EXAMPLES / "05-indexed-job.yaml").read_text())
    path = write(tmp_path, "jobs.yaml", [good, misspelt_job()])

    submitted = await podway_on(nats_url, "submit", "-f", path)

    assert submitted.code == 1
    assert submitted.err.splitlines() == [MISSPELT, "error: nothing was submitted"]
    assert submitted.out == ""
    assert await stack.client.get("Job", namespace=NAMESPACE) == []


async def podway_in_background(nats_url: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "libs.client.cli",
        *args,
        "--nats-url",
        nats_url,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(process: asyncio.subprocess.Process) -> Run:
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


async def test_submit_wait_follows_a_job_from_its_event_to_complete_and_answers_it_again(
    stack: Stack, nats_url: str
):
    job = str(EXAMPLES / "05-indexed-job.yaml")  # a gang of 8 pods that run 20 s each

    process = await podway_in_background(nats_url, "submit", "-f", job, "--wait")
    running = await eventually(
        lambda: stack.client.get("Pod", namespace=NAMESPACE),
        lambda pods: len(pods) == 8 and all((p.get("status") or {}).get("phase") == "Running" for p in pods),
        timeout_s=30,
    )
    assert len(running) == 8
    stack.agent_clock.advance(timedelta(seconds=21))
    stack.agent.wake()
    run = await finished(process)

    assert run.code == 0, run.err
    submitted, admitted, complete = run.out.splitlines()
    assert submitted.startswith("job.batch/finetune submitted (event ")
    assert (admitted, complete) == ("job.batch/finetune created", "job.batch/finetune Complete")
    (stored,) = await stack.client.get("Job", "finetune", NAMESPACE)
    assert stored["status"]["conditions"][0]["type"] == "Complete"

    again = await finished(await podway_in_background(nats_url, "submit", "-f", job, "--wait"))

    assert again.code == 0, again.err
    assert again.out.splitlines()[1:] == ["job.batch/finetune unchanged", "job.batch/finetune Complete"]


async def test_submit_wait_exits_1_when_admission_refuses_the_job(
    stack: Stack, nats_url: str, tmp_path: Path
):
    (job,) = load_documents((EXAMPLES / "05-indexed-job.yaml").read_text())
    job["spec"]["template"]["spec"]["priorityClassName"] = "no-such-class"
    path = write(tmp_path, "job.yaml", [job])

    run = await finished(await podway_in_background(nats_url, "submit", "-f", path, "--wait"))

    assert run.code == 1
    assert run.out.startswith("job.batch/finetune submitted (event ")
    assert 'The Job "finetune" is invalid:' in run.err
    assert "no-such-class" in run.err


async def test_objects_read_back_with_get_apply_again_under_strict_validation(
    stack: Stack, nats_url: str, tmp_path: Path
):
    await stack.client.apply(gang("again", 2))
    await eventually(
        lambda: stack.client.get("Pod", namespace=NAMESPACE),
        lambda pods: len(pods) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods),
        timeout_s=30,
    )
    for kind in ("pods", "podgroups", "workloads"):
        shown = await podway_on(nats_url, "get", kind, "-n", NAMESPACE, "-o", "yaml")
        path = tmp_path / f"{kind}.yaml"
        path.write_text(shown.out)

        again = await podway_on(nats_url, "apply", "-f", str(path))

        assert (again.code, again.err) == (0, ""), kind
