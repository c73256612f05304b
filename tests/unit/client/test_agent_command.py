"""`podway agent`: an agent of its own beside the stack's, started with the taints it was given."""

from __future__ import annotations

import pytest

from libs.client.cli import build_parser
from libs.client.commands import pods


def test_podway_agent_passes_its_taints_and_runs_as_an_agent_of_its_own(monkeypatch: pytest.MonkeyPatch):
    started: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(pods.os, "execve", lambda _path, argv, env: started.append((argv, env)))
    monkeypatch.delenv("PODWAY_INSTANCE", raising=False)
    args = build_parser("agent").parse_args(
        ["agent", "--nats-url", "nats://x", "--database-url", "sqlite://", "--node-name", "gpu-7"]
        + ["--taint", "a=b:NoSchedule", "--taint", "c:NoExecute"]
    )

    args.handler(args)

    ((argv, env),) = started
    assert argv[-4:] == ["--taint", "a=b:NoSchedule", "--taint", "c:NoExecute"]
    # Not instance 0, the stack's own agent: that one's event consumer would be shared with this one.
    assert env["PODWAY_INSTANCE"] == "gpu-7"
