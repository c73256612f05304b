"""The policy file on disk: read it, and hot-reload the router when it changes (a bad edit keeps the old one)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from libs.core.routing import PolicyError, RoutingPolicy, load_policy
from libs.routing_engine.router import Router


def read_policy_file(path: str | os.PathLike[str]) -> RoutingPolicy:
    """Load and validate a policy file; PolicyError names the file and every bad field path."""
    file = Path(path)
    try:
        return load_policy(file.read_text())
    except PolicyError as exc:
        raise PolicyError([type(i)(f"{file}: {i.path}", i.message) for i in exc.issues]) from exc


class PolicyFileWatcher:
    """Reloads `router` when the file's modification time or size changes; call `check()` periodically."""

    def __init__(
        self,
        router: Router,
        path: str | os.PathLike[str],
        on_error: Callable[[PolicyError], None] | None = None,
    ) -> None:
        self._router = router
        self._path = Path(path)
        self._on_error = on_error
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = self._path.stat()
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def check(self) -> bool:
        """Reload if the file changed; True when a new policy is in force. An invalid file is reported
        through `on_error` and the router keeps the policy it has."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return False
        self._seen = stamp
        try:
            policy = read_policy_file(self._path)
        except PolicyError as exc:
            if self._on_error is not None:
                self._on_error(exc)
            return False
        self._router.reload(policy)
        return True
