"""How the process runtime holds containers to their limits: a cgroup v2 of its own when the host lets it
write one (its files checked on a stand-in hierarchy), rlimits otherwise (enforced: see the process
runtime's integration tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.node_agent import limits as limits_module
from services.node_agent.limits import ContainerLimits, HostLimits


@pytest.fixture
def unified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for a writable cgroup v2 hierarchy with the cpu and memory controllers."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    monkeypatch.setattr(limits_module, "CGROUP_ROOT", tmp_path)
    return tmp_path


def test_a_writable_unified_hierarchy_gives_each_container_a_cgroup_with_its_limits(unified: Path):
    host = HostLimits.detect("podway-agent")

    assert host.mode == "CgroupV2"
    assert (unified / "podway-agent" / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert host.condition()["reason"] == "CgroupV2"
    join = host.before_exec("pod-1_main", ContainerLimits(cpu_m=500, memory_bytes=256 * 2**20))
    assert join is not None
    group = unified / "podway-agent" / "pod-1_main"
    assert (group / "cpu.max").read_text() == "50000 100000"
    assert (group / "memory.max").read_text() == str(256 * 2**20)
    join()  # what the child runs before exec: it moves itself into the group
    assert (group / "cgroup.procs").read_text() == "0"
    (group / "cgroup.procs").unlink()  # a real cgroup's files go with it
    for name in ("cpu.max", "memory.max"):
        (group / name).unlink()
    host.release("pod-1_main")
    assert not group.exists()


def test_without_a_unified_hierarchy_memory_is_an_rlimit_and_cpu_is_not_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(limits_module, "CGROUP_ROOT", tmp_path)  # no cgroup.controllers: not cgroup v2

    host = HostLimits.detect("podway-agent")

    assert host.mode == "Rlimits"
    assert "CPU limits not enforced" in host.condition()["message"]
    assert host.before_exec("pod-1_main", ContainerLimits(cpu_m=500, memory_bytes=None)) is None
    assert host.before_exec("pod-1_main", ContainerLimits(cpu_m=None, memory_bytes=2**30)) is not None


def test_a_container_without_limits_takes_the_fast_spawn(unified: Path):
    host = HostLimits.detect("podway-agent")
    assert host.before_exec("pod-1_main", ContainerLimits(None, None)) is None
    assert not (unified / "podway-agent" / "pod-1_main").exists()
