"""The job's batch policy in the Trainer's own terms: per-device batch and gradient accumulation.

The Trainer's global batch is ``per_device_train_batch_size x gradient_accumulation_steps x
world size``. Under keep-global it stays what it was on the reference grant (the script's
arguments on ``reference_replicas`` devices): on another world size the per-device batch and
the accumulation are chosen so that their product with the world size is that global batch
again, the per-device batch never above the script's (it fitted a device's memory), with as
little accumulation as that allows. Where no choice keeps it exactly (a global batch that the
world size does not divide), the nearest is used and said. Under keep-per-replica the
per-device batch and the accumulation stay the script's and the learning rate is scaled by
world size / reference replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import protocol as P


@dataclass(frozen=True)
class BatchPlan:
    per_device: int
    accumulation: int
    world: int
    #: The script's global batch on the reference grant.
    reference_global: int
    #: Factor applied to the script's learning rate.
    lr_scale: float
    #: Why the policy could not be honoured exactly (None: it is).
    note: str | None = None

    @property
    def global_batch(self) -> int:
        return self.per_device * self.accumulation * self.world

    def describe(self, policy: str) -> str:
        text = (
            f"batch policy {policy}: per-device batch {self.per_device} x gradient accumulation "
            f"{self.accumulation} x {self.world} replicas = global batch {self.global_batch}"
        )
        if self.global_batch != self.reference_global:
            text += f" (the script's global batch: {self.reference_global})"
        if self.lr_scale != 1.0:
            text += f"; learning rate x{self.lr_scale:g} of the script's"
        return text


def plan(
    policy: str, per_device: int, accumulation: int, world: int, reference_replicas: int
) -> BatchPlan:
    """The per-device batch and accumulation for ``world`` replicas (see the module's doc)."""
    per_device, accumulation = max(1, per_device), max(1, accumulation)
    world, reference = max(1, world), max(1, reference_replicas)
    target = per_device * accumulation * reference
    if policy == P.BatchPolicy.KEEP_PER_REPLICA:
        return BatchPlan(per_device, accumulation, world, target, world / reference)
    if target % world == 0:
        per_process = target // world  # samples each process takes per optimizer step
        for acc in range(1, per_process + 1):
            if per_process % acc == 0 and per_process // acc <= per_device:
                return BatchPlan(per_process // acc, acc, world, target, 1.0)
    # the world size does not divide the global batch: the nearest one above it
    acc = accumulation
    per = max(1, -(-target // (acc * world)))
    chosen = BatchPlan(per, acc, world, target, 1.0)
    note = (
        f"the global batch {target} cannot be kept on {world} replicas (not divisible): "
        f"using {per} x {acc} x {world} = {chosen.global_batch}"
    )
    return BatchPlan(per, acc, world, target, 1.0, note)
