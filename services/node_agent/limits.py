"""How the process runtime holds a container to its CPU and memory limits: a cgroup v2 of its own when the
host lets the agent write one, otherwise rlimits (memory as RLIMIT_AS; CPU is not capped)."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


@dataclass(frozen=True, slots=True)
class ContainerLimits:
    cpu_m: int | None
    memory_bytes: int | None


class HostLimits:
    """Decided once per agent: `mode` is `CgroupV2` or `Rlimits`, and `message` says what each enforces."""

    def __init__(self, cgroup_base: Path | None) -> None:
        self.cgroup_base = cgroup_base
        self.mode = "CgroupV2" if cgroup_base is not None else "Rlimits"
        self.message = (
            f"cpu.max and memory.max in {cgroup_base}"
            if cgroup_base is not None
            else "memory limits as RLIMIT_AS; CPU limits not enforced (no writable cgroup v2)"
        )

    @classmethod
    def detect(cls, name: str) -> HostLimits:
        """cgroup v2 when the unified hierarchy is mounted and a `name` cgroup with the cpu and memory
        controllers can be made beside the agent's own; rlimits otherwise."""
        if not (CGROUP_ROOT / "cgroup.controllers").exists():
            return cls(None)
        with contextlib.suppress(OSError):
            base = CGROUP_ROOT / name
            base.mkdir(exist_ok=True)
            (base / "cgroup.subtree_control").write_text("+cpu +memory")
            return cls(base)
        return cls(None)

    def condition(self) -> dict[str, str]:
        return {"reason": self.mode, "message": self.message}

    def before_exec(self, key: str, limits: ContainerLimits) -> Callable[[], None] | None:
        """What the child runs between fork and exec, or None when the container has no limits (the spawn
        then avoids the slower fork-with-callback path)."""
        if limits.cpu_m is None and limits.memory_bytes is None:
            return None
        if self.cgroup_base is not None:
            group = self._cgroup(key, limits)
            if group is not None:
                return lambda: _join(group)
        memory = limits.memory_bytes
        if memory is None:
            return None
        return lambda: resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    def _cgroup(self, key: str, limits: ContainerLimits) -> Path | None:
        assert self.cgroup_base is not None
        group = self.cgroup_base / key
        try:
            group.mkdir(exist_ok=True)
            if limits.memory_bytes is not None:
                (group / "memory.max").write_text(str(limits.memory_bytes))
            if limits.cpu_m is not None:
                (group / "cpu.max").write_text(f"{limits.cpu_m * CPU_PERIOD_US // 1000} {CPU_PERIOD_US}")
        except OSError:
            return None
        return group

    def release(self, key: str) -> None:
        if self.cgroup_base is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self.cgroup_base / key)


def _join(group: Path) -> None:
    (group / "cgroup.procs").write_text("0")
