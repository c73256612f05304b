"""Pure placement of single pods on a GPU fleet with shared and whole GPUs: the fleet as arrays, the
paper's fragmentation measure, and the placement policies the simulator compares."""

from .fleet import MILLI, Choice, GpuFleet, NodeSpec, PodDemand, tightest_gpus
from .fragmentation import ShapeMix, expected_fragmentation
from .policies import POLICY_NAMES, PlacementPolicy, make_policy

__all__ = [
    "MILLI",
    "POLICY_NAMES",
    "Choice",
    "GpuFleet",
    "NodeSpec",
    "PlacementPolicy",
    "PodDemand",
    "ShapeMix",
    "expected_fragmentation",
    "make_policy",
    "tightest_gpus",
]
