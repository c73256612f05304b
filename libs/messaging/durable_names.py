"""Durable consumer names NATS accepts, derived from names it may not (a Kubernetes node's, with dots).

A consumer name is part of JetStream API subjects, so nats-server refuses one with `.`, `*`, `>`, a path
separator or white space. A name is kept as it is when it is made of letters, digits, `-` and `_` only, and
short; any other is mapped onto those characters, with a digest of the original so that two names mapped
alike (`a.b`, `a_b`) stay two consumers.
"""

from __future__ import annotations

import hashlib
import re

MAX_LENGTH = 64
_NOT_KEPT = re.compile(r"[^A-Za-z0-9_-]")


def durable_name(*parts: str) -> str:
    """The durable name of `parts` joined with `-`: as it is if NATS takes it, else mapped and suffixed."""
    wanted = "-".join(parts)
    name = _NOT_KEPT.sub("-", wanted)
    if name == wanted and len(name) <= MAX_LENGTH:
        return name
    digest = hashlib.sha256(wanted.encode()).hexdigest()[:8]
    return f"{name[: MAX_LENGTH - len(digest) - 1]}-{digest}"
