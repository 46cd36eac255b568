"""Pure scheduling logic: a snapshot of GPUs and jobs in, a target allocation out.

Nothing in this package does I/O, reads a clock or uses asyncio, so the same policy means the
same thing in the simulator, in tests and in the live scheduler. Drivers call
``schedule.decide(policy, snapshot, now)``: the policy's decision under the rules every policy
shares (the per-user GPU cap, fair share between users); ``schedule.queue_positions`` numbers
the queue in policy order.
"""

from .model import Decision, Gpu, Job, Snapshot
from .schedule import decide, queue_positions
from .speed import SpeedModel

__all__ = ["Decision", "Gpu", "Job", "Snapshot", "SpeedModel", "decide", "queue_positions"]
