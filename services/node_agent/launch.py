"""A bound pod made ready to run as processes: its containers' command lines and environments resolved by
the core's downward API, its gang's rendezvous written down, its devices handed over."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from libs.api.jobs import COMPLETION_INDEX
from libs.api.quantity import QuantityError, parse_quantity
from libs.core.kubelet.downward import EnvError, PodPlace, command_line, container_env
from libs.core.kubelet.rendezvous import GangMember, members_file, rendezvous_env, visible_devices
from libs.core.kubelet.restarts import restart_policy_of
from libs.db.records import StoredObject
from services.node_agent.limits import ContainerLimits
from services.node_agent.processes import ContainerSpec, PodProcesses

DEFAULT_GRACE_S = 30.0
MEMBERS_FILE = "gang-members"
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ", "VIRTUAL_ENV")
"""What a process gets from the agent's environment in place of an image's: enough to find interpreters."""


def manifest_of(pod: StoredObject) -> dict[str, Any]:
    return {"metadata": {**pod.metadata, "uid": pod.uid}, "spec": pod.spec}


def completion_index(pod: StoredObject) -> int | None:
    index = (pod.metadata.get("annotations") or {}).get(COMPLETION_INDEX)
    return int(index) if index is not None and str(index).isdigit() else None


def grace_seconds(pod: StoredObject) -> float:
    """The pod's own grace period (`spec.terminationGracePeriodSeconds`, upstream's 30 s when it has none)."""
    own = _seconds(pod.spec.get("terminationGracePeriodSeconds"))
    return DEFAULT_GRACE_S if own is None else own


def deletion_grace(pod: StoredObject) -> float | None:
    """The grace period a pod's deletion gave it (`metadata.deletionGracePeriodSeconds`), if it says one."""
    return _seconds(pod.metadata.get("deletionGracePeriodSeconds"))


def _seconds(value: object) -> float | None:
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        else None
    )


def base_env(pod: StoredObject, devices: Mapping[str, list[str]]) -> dict[str, str]:
    """What the agent puts in every container's environment before the container's own `env`."""
    env = {name: os.environ[name] for name in INHERITED if name in os.environ}
    env["HOSTNAME"] = pod.name
    visible = visible_devices(devices)
    env["NVIDIA_VISIBLE_DEVICES"] = visible or "void"
    env["CUDA_VISIBLE_DEVICES"] = visible
    index = completion_index(pod)
    if index is not None:
        env["JOB_COMPLETION_INDEX"] = str(index)
    return env


def pod_processes(
    pod: StoredObject,
    directory: Path,
    place: PodPlace,
    *,
    devices: Mapping[str, list[str]],
    members: list[GangMember] | None,
) -> PodProcesses:
    """The pod's containers as processes to run; a container whose environment cannot be made carries the
    error it fails with."""
    env = base_env(pod, devices)
    if members:
        path = directory / MEMBERS_FILE
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(members_file(members))
        env.update(rendezvous_env(members, pod.name, str(path)))
    manifest = manifest_of(pod)

    def spec_of(container: Mapping[str, Any]) -> ContainerSpec:
        name = str(container.get("name") or "")
        try:
            resolved = container_env(manifest, container, place, env)
        except EnvError as error:
            return ContainerSpec(
                name, str(container.get("image") or ""), [], {}, None, _limits(container), str(error)
            )
        working_dir = container.get("workingDir")
        return ContainerSpec(
            name=name,
            image=str(container.get("image") or ""),
            argv=command_line(container, resolved),
            env=resolved,
            working_dir=str(working_dir) if working_dir else None,
            limits=_limits(container),
        )

    return PodProcesses(
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        directory=directory,
        policy=restart_policy_of(pod.spec),
        init=[spec_of(c) for c in pod.spec.get("initContainers") or []],
        main=[spec_of(c) for c in pod.spec.get("containers") or []],
        grace_s=grace_seconds(pod),
    )


def _limits(container: Mapping[str, Any]) -> ContainerLimits:
    limits = (container.get("resources") or {}).get("limits") or {}
    try:
        cpu = parse_quantity(str(limits["cpu"])) * 1000 if "cpu" in limits else None
        memory = parse_quantity(str(limits["memory"])) if "memory" in limits else None
    except QuantityError:
        return ContainerLimits(None, None)
    return ContainerLimits(int(cpu) if cpu is not None else None, int(memory) if memory is not None else None)
