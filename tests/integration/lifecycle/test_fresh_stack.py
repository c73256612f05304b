"""A stack as a new user starts it: the node agent, as the GPU driver, installs the DeviceClasses of its
devices, so a Job asking `nvidia.com/gpu` runs without the user writing a DeviceClass."""

from __future__ import annotations

import copy

from services.node_agent.app import NodeAgentService
from services.node_agent.settings import NodeAgentSettings
from tests.integration.lifecycle.conftest import example
from tests.integration.scheduler.conftest import CLUSTER_SMALL, Stack
from tests.support import eventually


async def test_a_gpu_job_runs_on_a_fresh_stack_without_a_user_device_class(fresh_stack: Stack):
    stack = fresh_stack
    await stack.client.apply(example("01-priorityclasses.yaml") + example("05-indexed-job.yaml"))

    pods = await eventually(
        lambda: stack.client.get("Pod", namespace="ml"),
        lambda pods: len(pods) == 8 and all((p.get("status") or {}).get("phase") == "Running" for p in pods),
        timeout_s=30,
    )

    assert {(p.get("status") or {}).get("phase") for p in pods} == {"Running"}
    (gpu,) = await stack.client.get("DeviceClass", "gpu.example.com")
    assert gpu["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert await stack.client.get("DeviceClass", "fabric.example.com")


async def test_the_node_agent_never_overwrites_a_device_class_a_user_changed(fresh_stack: Stack):
    stack = fresh_stack
    (gpu,) = await stack.client.get("DeviceClass", "gpu.example.com")
    changed = copy.deepcopy(gpu)
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        changed["metadata"].pop(key, None)
    changed["spec"]["selectors"] = [
        {
            "cel": {
                "expression": 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "H200"'
            }
        }
    ]
    reply = await stack.client.apply([changed])
    assert reply.results[0].outcome == "updated"

    again = NodeAgentService(
        NodeAgentSettings(**{**stack.settings.model_dump(), "cluster_file": CLUSTER_SMALL, "instance": "1"}),
        clock=stack.agent_clock,
    )
    await again.register()

    (after,) = await stack.client.get("DeviceClass", "gpu.example.com")
    assert after["spec"]["selectors"] == changed["spec"]["selectors"]
    assert after["metadata"]["resourceVersion"] == str(int(gpu["metadata"]["resourceVersion"]) + 1)
    await again.engine.dispose()
