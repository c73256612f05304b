"""Every test here ends with no task left running (tests/ending.py)."""

from tests.ending import _no_task_outlives_the_test

__all__ = ["_no_task_outlives_the_test"]
