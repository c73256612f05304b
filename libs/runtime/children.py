"""Processes Podway starts and supervises."""

from __future__ import annotations

import signal
import sys


def stop_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGTERM when the supervisor dies, however it dies, so that a
    SIGKILLed `podway up` leaves no service running without its supervisor (and holding its lease)."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
