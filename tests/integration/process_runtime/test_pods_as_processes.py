"""Pods run as real processes through the whole stack: exit codes drive phases, logs are read back, bad input
fails the pod in kubelet's words."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from libs.runtime.pod_logs import log_file, read_run
from tests.integration.process_runtime.conftest import NODE, ProcessStack, get_pod, phase, pod, python
from tests.support import eventually


async def test_a_pod_runs_as_a_process_with_the_downward_api_and_its_output_is_logged(
    process_stack: ProcessStack,
):
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "GREETING", "value": "hello $(POD_NAME)"},
    ]
    script = (
        "import os; print(*(os.environ[k] for k in ('GREETING', 'NODE', 'IP', 'TEAM', 'MEM')), os.getcwd())"
    )
    manifest = pod(
        "hello",
        python(script),
        container={
            "env": env,
            "workingDir": str(process_stack.work),
            "resources": {"requests": {"cpu": "10m"}, "limits": {"memory": "512Mi"}},
        },
    )
    manifest["metadata"]["labels"] = {"team": "search"}
    await process_stack.client.apply([manifest])

    done = await eventually(lambda: get_pod(process_stack, "hello"), lambda p: phase(p) == "Succeeded")

    assert phase(done) == "Succeeded"
    status = done["status"]
    (container,) = status["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 0
    assert container["state"]["terminated"]["reason"] == "Completed"
    log = log_file(Path(status["podwayRuntime"]["logDir"]), "main", previous=False)
    assert log is not None
    assert read_run(log).split() == [
        "hello",
        "hello",
        NODE,
        status["podIP"],
        "search",
        "512",
        str(process_stack.work),
    ]
    assert status["podIP"].startswith("127.0.")


async def test_a_failing_container_fails_its_pod_with_its_exit_code(process_stack: ProcessStack):
    await process_stack.client.apply([pod("crash", python("import sys; sys.exit(3)"))])

    done = await eventually(lambda: get_pod(process_stack, "crash"), lambda p: phase(p) == "Failed")

    assert phase(done) == "Failed"
    terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert done["status"]["reason"] == "Error"


async def test_on_failure_restarts_with_back_off_until_the_container_succeeds(process_stack: ProcessStack):
    marker = process_stack.work / "tries"
    script = (
        f"import pathlib, sys; p = pathlib.Path({str(marker)!r}); n = len(p.read_text()) if p.exists() else 0;"
        "p.write_text('x' * (n + 1)); print('try', n); sys.exit(0 if n >= 2 else 1)"
    )
    await process_stack.client.apply([pod("flaky", python(script), restartPolicy="OnFailure")])

    done = await eventually(lambda: get_pod(process_stack, "flaky"), lambda p: phase(p) == "Succeeded")

    container = done["status"]["containerStatuses"][0]
    assert container["restartCount"] == 2
    assert container["lastState"]["terminated"]["exitCode"] == 1
    log_dir = Path(done["status"]["podwayRuntime"]["logDir"])
    assert read_run(log_file(log_dir, "main", previous=True)).strip() == "try 1"  # type: ignore[arg-type]
    nats_url = process_stack.agent_settings.nats_url
    assert await podway_logs(nats_url, "flaky", "-n", "ml", "-c", "main") == "try 2\n"  # type: ignore[arg-type]
    assert await podway_logs(nats_url, "flaky", "-n", "ml", "--previous") == "try 1\n"  # type: ignore[arg-type]


async def podway_logs(nats_url: str, *args: str) -> str:
    """`podway logs` as a user runs it, in its own process."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "libs.client.cli",
        "logs",
        "--nats-url",
        nats_url,
        *args,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    return out.decode()


async def test_init_containers_run_in_order_before_the_containers(process_stack: ProcessStack):
    trail = process_stack.work / "trail"

    def append(word: str) -> list[str]:
        return python(f"open({str(trail)!r}, 'a').write({word!r})")

    manifest = pod(
        "ordered",
        append("main"),
        initContainers=[
            {"name": "first", "image": "i", "command": append("first,")},
            {"name": "second", "image": "i", "command": append("second,")},
        ],
    )
    await process_stack.client.apply([manifest])

    done = await eventually(lambda: get_pod(process_stack, "ordered"), lambda p: phase(p) == "Succeeded")

    assert phase(done) == "Succeeded"
    assert trail.read_text() == "first,second,main"
    assert [s["name"] for s in done["status"]["initContainerStatuses"]] == ["first", "second"]


async def test_bad_input_fails_the_pod_in_kubelets_words_and_nothing_else(process_stack: ProcessStack):
    await process_stack.client.apply(
        [
            pod("no-such-command", ["no-such-command-anywhere"]),
            pod("bad-dir", python("pass"), container={"workingDir": "/no/such/dir"}),
            pod(
                "bad-field",
                python("pass"),
                container={
                    "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.nothing"}}}]
                },
            ),
            pod("fine", python("print('ok')")),
        ]
    )

    async def phases() -> dict[str, str | None]:
        return {
            n: phase(await get_pod(process_stack, n))
            for n in ("no-such-command", "bad-dir", "bad-field", "fine")
        }

    found = await eventually(phases, lambda p: set(p.values()) <= {"Failed", "Succeeded"})

    assert found == {
        "no-such-command": "Failed",
        "bad-dir": "Failed",
        "bad-field": "Failed",
        "fine": "Succeeded",
    }
    reasons = {}
    for name in ("no-such-command", "bad-dir", "bad-field"):
        status = (await get_pod(process_stack, name))["status"]  # type: ignore[index]
        reasons[name] = (status["reason"], status["message"])
    assert reasons["no-such-command"][0] == "RunContainerError"
    assert (
        'exec: "no-such-command-anywhere": executable file not found in $PATH'
        in reasons["no-such-command"][1]
    )
    assert reasons["bad-dir"][0] == "RunContainerError"
    assert "chdir to cwd ('/no/such/dir')" in reasons["bad-dir"][1]
    assert reasons["bad-field"] == (
        "CreateContainerConfigError",
        'error converting fieldPath: field label not supported: "metadata.nothing"',
    )


async def test_a_container_over_its_memory_limit_fails_and_one_within_it_succeeds(
    process_stack: ProcessStack,
):
    """The host's limits mode (its node condition) holds a container to `limits.memory`: on this kind of
    host an rlimit (the allocation fails), under a writable cgroup v2 memory.max (the kernel kills it)."""
    allocate = "import sys; block = bytearray(int(sys.argv[1]) * 2**20); print('allocated', len(block))"
    limits = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "256Mi"}}
    greedy = pod("greedy", [*python(allocate), "1024"], container={"resources": limits})
    modest = pod("modest", [*python(allocate), "32"], container={"resources": limits})
    await process_stack.client.apply([greedy, modest])

    over = await eventually(
        lambda: get_pod(process_stack, "greedy"), lambda p: phase(p) in ("Succeeded", "Failed")
    )
    within = await eventually(
        lambda: get_pod(process_stack, "modest"), lambda p: phase(p) in ("Succeeded", "Failed")
    )

    assert phase(over) == "Failed"
    (container,) = over["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] != 0
    assert phase(within) == "Succeeded"
