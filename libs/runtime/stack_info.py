"""How to reach a running stack: `<data_dir>/run/stack.json`, written by `podway up`. Standard library only, so
the CLI's read verbs find the stack without loading the settings machinery."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

STACK_FILE = "stack.json"


@dataclass
class StackInfo:
    """How to reach a running stack; written to `<data_dir>/run/stack.json`."""

    pid: int
    nats_url: str
    database_url: str
    data_dir: str
    started_at: float
    services: dict[str, int | None] = field(default_factory=dict)
    emulators: dict[str, str] = field(default_factory=dict)
    ready: bool = False
    nats_pid: int | None = None
    """The embedded nats-server's process (None for an external server)."""
    router_url: str | None = None
    """The router's OpenAI-compatible front (None when the router does not run)."""

    def write(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = run_dir / (STACK_FILE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.chmod(0o600)  # the URLs may carry credentials
        os.replace(tmp, run_dir / STACK_FILE)

    @classmethod
    def read(cls, run_dir: Path) -> StackInfo | None:
        try:
            return cls(**json.loads((run_dir / STACK_FILE).read_text()))
        except (OSError, ValueError, TypeError):
            return None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
