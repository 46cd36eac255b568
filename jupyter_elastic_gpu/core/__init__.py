"""Pure scheduling logic: a snapshot of GPUs and jobs in, a target allocation out.

Nothing in this package does I/O, reads a clock or uses asyncio, so the same policy means the
same thing in the simulator, in tests and in the live scheduler.
"""

from .model import Decision, Gpu, Job, Snapshot
from .speed import SpeedModel

__all__ = ["Decision", "Gpu", "Job", "Snapshot", "SpeedModel"]
