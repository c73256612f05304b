"""The process runtime: each container of a pod run as a process in its own process group, its output in
rotated log files, restarted per restartPolicy with kubelet's back-off, stopped with SIGTERM then SIGKILL of
the whole group, and found again after an agent restart from its pid file and start time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from libs.core.kubelet.phases import (
    START_ERROR_EXIT_CODE,
    ContainerEnd,
    ContainerReason,
    PodEnd,
    container_status,
    pod_end,
)
from libs.core.kubelet.restarts import BackOff, RestartPolicy, init_restarts, restart_delay, restarts
from services.node_agent.limits import ContainerLimits, HostLimits

log = logging.getLogger(__name__)

LOG_MAX_BYTES = 10 * 2**20
LOG_MAX_FILES = 5
"""Kubelet's defaults: a container's log rotates at 10 MiB, five files kept."""
ADOPTED_POLL_S = 0.2
GROUP_POLL_S = 0.01
KILL_WAIT_S = 5.0
RUNC = "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """A container ready to run: its command line and environment resolved, or why it cannot be made."""

    name: str
    image: str
    argv: list[str]
    env: dict[str, str]
    working_dir: str | None
    limits: ContainerLimits
    config_error: str = ""


@dataclass(slots=True)
class PodProcesses:
    """One pod on this host: what to run, and the processes running it."""

    uid: str
    namespace: str
    name: str
    directory: Path
    policy: RestartPolicy
    init: list[ContainerSpec]
    main: list[ContainerSpec]
    grace_s: float
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, int] = field(default_factory=dict)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    adopted: bool = False

    def container_statuses(self, specs: list[ContainerSpec]) -> list[dict[str, Any]]:
        return [self.statuses[c.name] for c in specs if c.name in self.statuses]


@dataclass(frozen=True, slots=True)
class PodFinished:
    """A pod none of whose containers will run again, with kubelet's statuses for it."""

    uid: str
    namespace: str
    name: str
    end: PodEnd
    container_statuses: list[dict[str, Any]]
    init_container_statuses: list[dict[str, Any]]


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, it names
    one process, whatever pid reuse happened since."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ProcessRuntime:
    """Runs pods under `root` (one directory per pod: `pod.json`, pid files, `logs/`); `on_finished` is told
    of every pod that ended on its own. Pods stopped by `terminate` are not reported: their stopper does."""

    def __init__(
        self,
        root: Path,
        *,
        limits: HostLimits,
        back_off: BackOff,
        on_finished: Callable[[PodFinished], None],
        log_max_bytes: int = LOG_MAX_BYTES,
    ) -> None:
        self.root = root
        self.limits = limits
        self.back_off = back_off
        self.on_finished = on_finished
        self.log_max_bytes = log_max_bytes
        self.pods: dict[str, PodProcesses] = {}
        root.mkdir(parents=True, exist_ok=True)

    def __contains__(self, uid: object) -> bool:
        return uid in self.pods

    def pod_directory(self, namespace: str, name: str, uid: str) -> Path:
        return self.root / f"{namespace}_{name}_{uid}"

    # -- starting ---------------------------------------------------------------------------------------

    async def start(self, pod: PodProcesses) -> None:
        """Start the pod's first processes (its first init container, or all its containers) and return once
        they were spawned; the rest of the pod's life runs in a task."""
        if pod.uid in self.pods:
            return
        self.pods[pod.uid] = pod
        pod.directory.mkdir(parents=True, exist_ok=True)
        (pod.directory / "pod.json").write_text(json.dumps({"uid": pod.uid, "grace_s": pod.grace_s}))
        pod.task = asyncio.create_task(self._live(pod), name=f"pod-{pod.name}")
        await pod.started.wait()

    async def _live(self, pod: PodProcesses) -> None:
        try:
            finished = await self._run(pod)
        except Exception:
            log.exception("running pod %s/%s failed", pod.namespace, pod.name)
            end = ContainerEnd("pod", START_ERROR_EXIT_CODE, now_iso(), now_iso(), "RunContainerError", "")
            finished = PodFinished(pod.uid, pod.namespace, pod.name, pod_end([end]), [], [])
        finally:
            pod.started.set()
        if finished is not None and not pod.stopping.is_set():
            self.pods.pop(pod.uid, None)
            self.on_finished(finished)

    async def _run(self, pod: PodProcesses) -> PodFinished | None:
        """Init containers one after the other, each to success, then every container at once."""
        for spec in pod.init:
            end = await self._until_done(pod, spec, init=True)
            if end is None:
                return None
            if end.exit_code != 0:
                return self._finished(pod, pod_end([], init_failed=end))
        ends = await asyncio.gather(*(self._until_done(pod, spec, init=False) for spec in pod.main))
        if any(end is None for end in ends):
            return None
        return self._finished(pod, pod_end([end for end in ends if end is not None]))

    def _finished(self, pod: PodProcesses, end: PodEnd) -> PodFinished:
        return PodFinished(
            pod.uid,
            pod.namespace,
            pod.name,
            end,
            pod.container_statuses(pod.main),
            pod.container_statuses(pod.init),
        )

    async def _until_done(self, pod: PodProcesses, spec: ContainerSpec, *, init: bool) -> ContainerEnd | None:
        """Run one container until it ends for good under the pod's restartPolicy; None when the pod was
        stopped meanwhile."""
        crashes = 0
        restart_count = 0
        last: ContainerEnd | None = None
        while True:
            started = asyncio.get_running_loop().time()
            end = await self._run_once(pod, spec, restart_count, last)
            if end is None or pod.stopping.is_set():
                return None
            again = init_restarts(pod.policy, end.exit_code) if init else restarts(pod.policy, end.exit_code)
            if not again:
                pod.statuses[spec.name] = container_status(
                    spec.name, spec.image, end.state(), restart_count, last
                )
                return end
            crashes = crashes + 1 if end.exit_code != 0 else 0
            ran_s = asyncio.get_running_loop().time() - started
            delay = restart_delay(self.back_off, crashes, ran_s) if end.exit_code != 0 else 0.0
            waiting = {
                "waiting": {
                    "reason": ContainerReason.CRASH_LOOP_BACK_OFF,
                    "message": f"back-off {delay:g}s restarting failed container={spec.name}",
                }
            }
            pod.statuses[spec.name] = container_status(spec.name, spec.image, waiting, restart_count, end)
            last, restart_count = end, restart_count + 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pod.stopping.wait(), delay)
            if pod.stopping.is_set():
                return None

    async def _run_once(
        self, pod: PodProcesses, spec: ContainerSpec, restart_count: int, last: ContainerEnd | None
    ) -> ContainerEnd | None:
        started_at = now_iso()
        try:
            process = await self._spawn(pod, spec, restart_count)
        except _StartError as error:
            pod.started.set()
            return ContainerEnd(
                spec.name, START_ERROR_EXIT_CODE, started_at, now_iso(), error.reason, str(error)
            )
        pod.groups[spec.name] = process.pid
        running = {"running": {"startedAt": started_at}}
        pod.statuses[spec.name] = container_status(spec.name, spec.image, running, restart_count, last)
        pod.started.set()
        exit_code = await process.wait()
        pod.groups.pop(spec.name, None)
        (pod.directory / f"{spec.name}.pid").unlink(missing_ok=True)
        self.limits.release(f"{pod.uid}-{spec.name}")
        # A process killed by signal N reads as 128+N, as container runtimes report it.
        code = 128 - exit_code if exit_code < 0 else exit_code
        return ContainerEnd(spec.name, code, started_at, now_iso())

    async def _spawn(
        self, pod: PodProcesses, spec: ContainerSpec, restart_count: int
    ) -> asyncio.subprocess.Process:
        executable = _executable(spec)
        log_fd = self._open_log(pod, spec.name, restart_count)
        try:
            process = await asyncio.create_subprocess_exec(
                executable,
                *spec.argv[1:],
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                cwd=spec.working_dir or None,
                env=spec.env,
                start_new_session=True,
                preexec_fn=self.limits.before_exec(f"{pod.uid}-{spec.name}", spec.limits),
            )
        except OSError as error:
            raise _StartError(
                ContainerReason.RUN_CONTAINER_ERROR,
                f"{RUNC}: unable to start container process: {error}: unknown",
            ) from error
        finally:
            os.close(log_fd)
        start_time = process_start_time(process.pid) or ""
        (pod.directory / f"{spec.name}.pid").write_text(f"{process.pid} {start_time}\n")
        return process

    def _open_log(self, pod: PodProcesses, container: str, restart_count: int) -> int:
        directory = pod.directory / "logs" / container
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{restart_count}.log"
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    # -- stopping ---------------------------------------------------------------------------------------

    async def terminate(self, uid: str, grace_s: float | None = None) -> bool:
        """SIGTERM to each of the pod's process groups, SIGKILL to what is left after the grace period;
        returns once every process of the pod is gone (False if this runtime did not run it)."""
        pod = self.pods.get(uid)
        if pod is None:
            return False
        pod.stopping.set()
        grace = pod.grace_s if grace_s is None else grace_s
        groups = list(pod.groups.values())
        for pgid in groups:
            signal_group(pgid, signal.SIGTERM)
        await self._until_gone(groups, grace)
        left = [pgid for pgid in groups if group_alive(pgid)]
        for pgid in left:
            signal_group(pgid, signal.SIGKILL)
        await self._until_gone(left, KILL_WAIT_S)
        if pod.task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pod.task, KILL_WAIT_S)
        self.pods.pop(uid, None)
        return True

    @staticmethod
    async def _until_gone(groups: list[int], within_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        # A process group's end raises no event (its leader may be gone while members live on): poll.
        while any(group_alive(pgid) for pgid in groups) and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(GROUP_POLL_S)

    async def terminate_all(self) -> None:
        await asyncio.gather(*(self.terminate(uid) for uid in list(self.pods)))

    def forget(self, uid: str) -> None:
        """Remove a finished pod's directory once nothing reads its logs any more (its pod was deleted)."""
        for directory in self.root.glob(f"*_{uid}"):
            shutil.rmtree(directory, ignore_errors=True)

    # -- after an agent restart -------------------------------------------------------------------------

    def adopt(self, wanted: dict[str, PodProcesses]) -> list[str]:
        """Find the processes a previous agent started: a pod in `wanted` whose every recorded process still
        runs (same pid, same start time) is watched again; a recorded pod not wanted is killed (nothing is
        left orphaned). Returns the wanted pods found without their processes (lost)."""
        lost = []
        for uid, pod in wanted.items():
            groups = self._recorded(pod.directory)
            if groups and all(alive for _, alive in groups.values()):
                pod.groups = {name: pid for name, (pid, _) in groups.items()}
                pod.adopted = True
                self.pods[uid] = pod
                pod.task = asyncio.create_task(self._watch_adopted(pod), name=f"adopted-{pod.name}")
            else:
                for pid, alive in groups.values():
                    if alive:
                        signal_group(pid, signal.SIGKILL)
                lost.append(uid)
        for directory in self.root.iterdir() if self.root.exists() else []:
            if directory.is_dir() and directory.name.rsplit("_", 1)[-1] not in wanted:
                for pid, alive in self._recorded(directory).values():
                    if alive:
                        log.warning("killing orphaned process group %d of %s", pid, directory.name)
                        signal_group(pid, signal.SIGKILL)
        return lost

    @staticmethod
    def _recorded(directory: Path) -> dict[str, tuple[int, bool]]:
        recorded: dict[str, tuple[int, bool]] = {}
        for pid_file in directory.glob("*.pid"):
            with contextlib.suppress(ValueError, OSError):
                pid_text, start_time = (pid_file.read_text().split() + [""])[:2]
                pid = int(pid_text)
                recorded[pid_file.stem] = (pid, bool(start_time) and process_start_time(pid) == start_time)
        return recorded

    async def _watch_adopted(self, pod: PodProcesses) -> None:
        """An adopted process is not this agent's child: its exit code is lost, so its end is reported as
        kubelet reports a container it cannot account for."""
        while any(group_alive(pgid) for pgid in pod.groups.values()):
            await asyncio.sleep(ADOPTED_POLL_S)
            if pod.stopping.is_set():
                return
        if pod.stopping.is_set():
            return
        self.pods.pop(pod.uid, None)
        ends = [
            ContainerEnd(
                name,
                137,
                "",
                now_iso(),
                ContainerReason.CONTAINER_STATUS_UNKNOWN,
                "the container ended while its agent was away; its exit code is unknown",
            )
            for name in pod.groups
        ]
        statuses = [container_status(e.name, "", e.state(), 0, None) for e in ends]
        self.on_finished(PodFinished(pod.uid, pod.namespace, pod.name, pod_end(ends), statuses, []))

    # -- logs -------------------------------------------------------------------------------------------

    def rotate_logs(self) -> None:
        """Copy-and-truncate each running container's log once it passed the size limit (the process keeps
        its descriptor, opened for appending), keeping LOG_MAX_FILES files."""
        for pod in list(self.pods.values()):
            for directory in (pod.directory / "logs").glob("*"):
                current = max(directory.glob("*.log"), key=lambda p: int(p.stem), default=None)
                if current is not None and current.stat().st_size > self.log_max_bytes:
                    rotate(current, LOG_MAX_FILES)


def rotate(path: Path, keep: int) -> None:
    for index in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{index}")
        if older.exists():
            older.replace(path.with_name(f"{path.name}.{index + 1}"))
    shutil.copyfile(path, path.with_name(f"{path.name}.1"))
    with path.open("r+b") as stream:
        stream.truncate(0)


def _executable(spec: ContainerSpec) -> str:
    """The program a container runs, or the _StartError kubelet would report for it."""
    if spec.config_error:
        raise _StartError(ContainerReason.CREATE_CONTAINER_CONFIG_ERROR, spec.config_error)
    if not spec.argv:
        raise _StartError(
            ContainerReason.CREATE_CONTAINER_ERROR,
            "the process runtime pulls no image and runs no entrypoint: the container needs a command",
        )
    if spec.working_dir and not os.path.isdir(spec.working_dir):
        raise _StartError(
            ContainerReason.RUN_CONTAINER_ERROR,
            f"{RUNC}: unable to start container process: chdir to cwd ({spec.working_dir!r}) set in "
            "config.json failed: no such file or directory: unknown",
        )
    program = spec.argv[0]
    executable = program if "/" in program else shutil.which(program, path=spec.env.get("PATH"))
    if executable is None or not os.access(executable, os.X_OK):
        raise _StartError(
            ContainerReason.RUN_CONTAINER_ERROR,
            f'{RUNC}: unable to start container process: exec: "{program}": executable file not found in '
            "$PATH: unknown",
        )
    return executable


class _StartError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
