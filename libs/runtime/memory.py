"""Garbage collection for long-running services that hold a large, long-lived state.

CPython's defaults (a young collection every 700 net allocations, a full one whenever the old generation
grew by a quarter) suit short scripts. A service holding a fleet's snapshot, caches and connection pools pays
for them in full collections that walk the whole heap: 100-230 ms each in the scheduler benchmark, during which
the event loop answers nothing. So: rarer young collections, rarer full ones, and the state a service builds at
start (or reloads) frozen out of the collector's reach. Reference counting still frees what is not in a cycle.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 5_000
"""Net allocations between young collections (CPython: 700)."""
MIDDLE_THRESHOLD = 5
"""Young collections between middle ones (CPython: 10). An object that survives a young collection is walked by
one middle collection whatever this is, so a lower one costs little more work and bounds the pause: at 20,
admission's middle collections after a list of 10,000 pods took 20-60 ms, in the middle of the writes that
followed (`podway bench kube-api`); at 5, 5-13 ms."""
OLD_THRESHOLD = 50


def tune_collector() -> None:
    """Rarer collections for the whole process; call once, before the service starts."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)


def freeze_long_lived() -> None:
    """Move everything alive now out of the collector's reach (cheap: no collection runs); call once a
    large, long-lived state is built."""
    gc.freeze()
