"""Processes start ahead of the transaction that records them Running, and never twice."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from libs.db.ports import UnitOfWork
from libs.events.envelope import Envelope, EventPayload
from services.node_agent.app import NodeAgentService
from tests.integration.process_runtime.conftest import (
    ProcessStack,
    get_pod,
    phase,
    pod,
    python,
)
from tests.support import eventually


async def test_a_pod_that_ends_before_its_running_is_written_runs_once_and_succeeds(
    process_stack: ProcessStack,
) -> None:
    """The agent's write waits (as behind another process's lock) until the process has run to its end:
    the pod must not be started again by the write, and its end is recorded after its Running."""
    runs = process_stack.work / "runs"
    agent = process_stack.agent
    handle = agent.consumer._batch_handler
    assert handle is not None

    async def after_the_process_ended(
        events: Sequence[tuple[Envelope, EventPayload]], uow: UnitOfWork
    ) -> None:
        await eventually(lambda: _lines(runs), lambda n: n >= 1, timeout_s=20)
        await eventually(lambda: _ended(agent), bool, timeout_s=20)
        await handle(events, uow)

    agent.consumer._batch_handler = after_the_process_ended
    script = f"open({str(runs)!r}, 'a').write('ran\\n')"
    await process_stack.client.apply([pod("once", python(script))])

    done = await eventually(lambda: get_pod(process_stack, "once"), lambda p: phase(p) == "Succeeded")

    assert _count(runs) == 1
    (container,) = done["status"]["containerStatuses"]
    assert container["state"]["terminated"]["exitCode"] == 0
    assert done["status"]["podIP"].startswith("127.0.")


async def _lines(path: Path) -> int:
    return _count(path)


async def _ended(agent: NodeAgentService) -> bool:
    """The agent's runtime saw the pod's processes end (its end is queued to be recorded)."""
    assert agent.runtime is not None
    return not agent.runtime.pods


def _count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0
