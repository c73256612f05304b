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
MIDDLE_THRESHOLD = 20
"""Young collections between middle ones (CPython: 10)."""
SHORT_PAUSES_MIDDLE_THRESHOLD = 5
"""The same, for a service whose every request waits on it (admission, the API server). An object that
survives a young collection is walked by one middle collection whatever the threshold, so a lower one costs
little more work and bounds the pause: at 20, admission's middle collections after a list of 10,000 pods
took 20-60 ms, in the middle of the writes that followed (`podway bench kube-api`); at 5, 5-13 ms. Not for
all: more middle collections move more objects to the old generation sooner, and the scheduler bound fewer
pods per second with it (`podway bench scheduler-e2e`, alternating runs: 906-1,114 against 1,090-1,202)."""
OLD_THRESHOLD = 50


def tune_collector(*, short_pauses: bool = False) -> None:
    """Rarer collections for the whole process (with `short_pauses`, shorter middle ones); call once, before
    the service starts."""
    middle = SHORT_PAUSES_MIDDLE_THRESHOLD if short_pauses else MIDDLE_THRESHOLD
    gc.set_threshold(YOUNG_THRESHOLD, middle, OLD_THRESHOLD)


def freeze_long_lived() -> None:
    """Move everything alive now out of the collector's reach (cheap: no collection runs); call once a
    large, long-lived state is built."""
    gc.freeze()
