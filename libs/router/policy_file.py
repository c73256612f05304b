"""The policy file on disk: the one reader of it (at start and on every reload), and the watcher that
hot-reloads the router when it changes (a bad edit keeps the policy in force).

Templating rule: in the `providers` section, a string field written `${NAME}` or `${NAME:-default}` takes the
value of environment variable NAME (or the default); an empty value means null, i.e. the real cloud. So
`deploy/router/policy.yaml` says `endpoint_url: ${PODWAY_BEDROCK_ENDPOINT}` and the same file serves the local
emulators and, with the variables set empty, AWS and GCP. A reload resolves the file exactly as the first load
did. `check()` changes routes, deployments and breakers, not the provider clients (the router opens none); the
router service reads `changed_policy()` instead and opens a new client for each provider the edit changed.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from libs.core.routing import PolicyError, PolicyIssue, RoutingPolicy, load_policy
from libs.router.router import Router

PLACEHOLDER = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}$")
_ENDPOINT_FIELDS = ("region", "endpoint_url", "project", "location", "api_endpoint")

log = logging.getLogger(__name__)


def read_policy_file(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> RoutingPolicy:
    """Load and validate a policy file, its provider placeholders taken from `env` (os.environ); PolicyError
    names the file and every bad field path."""
    file = Path(path)
    try:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:  # a half-written or binary file: a file with mistakes, not a crash
            raise PolicyError([PolicyIssue("<document>", f"not UTF-8 text: {exc}")]) from exc
        return _resolve_provider_placeholders(load_policy(text), env)
    except PolicyError as exc:
        raise PolicyError([type(i)(f"{file}: {i.path}", i.message) for i in exc.issues]) from exc


def _resolve_provider_placeholders(
    policy: RoutingPolicy, env: Mapping[str, str] | None = None
) -> RoutingPolicy:
    """The policy with `${NAME}` / `${NAME:-default}` provider fields replaced from `env` (os.environ)."""
    env = os.environ if env is None else env
    issues: list[PolicyIssue] = []
    providers = {}
    for name, spec in policy.providers.items():
        updates: dict[str, str | None] = {}
        for field in _ENDPOINT_FIELDS:
            value = getattr(spec, field)
            match = PLACEHOLDER.match(value) if isinstance(value, str) else None
            if match is None:
                continue
            variable, default = match.group(1), match.group(2)
            resolved = env.get(variable, default)
            if resolved is None:
                issues.append(
                    PolicyIssue(f"providers.{name}.{field}", f"environment variable {variable} is not set")
                )
                continue
            updates[field] = resolved or None
        providers[name] = spec.model_copy(update=updates) if updates else spec
    if issues:
        raise PolicyError(issues)
    return policy.model_copy(update={"providers": providers})


class PolicyFileWatcher:
    """Reloads `router` when the file's modification time or size changes; call `check()` periodically."""

    def __init__(
        self,
        router: Router,
        path: str | os.PathLike[str],
        on_error: Callable[[PolicyError], None] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._router = router
        self._path = Path(path)
        self._on_error = on_error
        self._env = env
        self._gone = False
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            stat = self._path.stat()
        except FileNotFoundError:
            if not self._gone:  # once: a file removed for good would otherwise fill the log every check
                self._gone = True
                log.warning(
                    "policy file %s is gone; the policy in force stays, and the file is read again once it is "
                    "back",
                    self._path,
                )
            return None
        except OSError as exc:
            log.warning("policy file %s not readable, the policy in force stays: %r", self._path, exc)
            return None
        self._gone = False
        return stat.st_mtime_ns, stat.st_size

    def check(self) -> bool:
        """Reload if the file changed; True when a new policy is in force."""
        policy = self.changed_policy()
        if policy is None:
            return False
        self._router.reload(policy)
        return True

    def changed_policy(self) -> RoutingPolicy | None:
        """The file's policy if the file changed since it was last read, else None. An invalid file is reported
        through `on_error` (the router keeps the policy it has). A file that cannot be read now (briefly a
        directory, a permission, removed between stat and read) is logged and read again at the next call."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return None
        try:
            policy = read_policy_file(self._path, self._env)
        except PolicyError as exc:
            self._seen = stamp
            if self._on_error is not None:
                self._on_error(exc)
            return None
        except OSError as exc:
            log.warning("policy file %s not readable, the policy in force stays: %r", self._path, exc)
            return None
        self._seen = stamp
        return policy
