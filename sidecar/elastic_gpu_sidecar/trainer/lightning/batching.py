"""The per-device batch for the grant, and a sampler that resumes an epoch where it stopped.

Lightning gives each rank a ``DistributedSampler``: the epoch's order (one permutation of the
dataset, seeded by the seed and the epoch, the same on any replica count) dealt round-robin to
the ranks. With a per-device batch of ``global / replicas``, step ``t`` trains on positions
``[t * global, (t + 1) * global)`` of that order whatever the replica count, so keep-global
trains on the same global batches on any grant (only the order of the gradient reduction
changes). ``ElasticSampler`` is that sampler with one addition: the first pass over the
interrupted epoch starts after the positions trained before the restart, which Lightning does
not do for a plain ``DataLoader`` (it restores its counters, then reads the epoch from its
start again).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch.utils.data import DistributedSampler

from ... import protocol as P


@dataclass(frozen=True)
class BatchPlan:
    """The batch of one rank on this grant, and what the job's policy made of it."""

    per_device: int
    global_batch: int
    #: The learning rate as a multiple of the script's (keep-per-replica).
    lr_scale: float
    #: What could not be honoured, said in the log and in progress records.
    notes: list[str] = field(default_factory=list)

    def describe(self, policy: str, replicas: int) -> str:
        return (
            f"batch policy {policy}: global batch {self.global_batch} -> per-device "
            f"{self.per_device} on {replicas} replicas"
            + (f", learning rate x{self.lr_scale:g}" if self.lr_scale != 1.0 else "")
        )


def plan(
    user_batch: int, *, replicas: int, reference: int, policy: str, max_steps: int | None
) -> BatchPlan:
    """The per-device batch for ``replicas`` devices of a script whose ``DataLoader`` has
    ``user_batch`` per device and which first ran on ``reference`` devices."""
    script_global = user_batch * reference
    notes: list[str] = []
    if policy == P.BatchPolicy.KEEP_PER_REPLICA and replicas != reference:
        if max_steps is not None and max_steps > 0:
            notes.append(
                f"keep-per-replica would change the global batch ({script_global} -> "
                f"{user_batch * replicas}) of a Trainer that counts max_steps={max_steps}: the "
                "global batch is kept instead (keep-global), so max_steps means what it did"
            )
        else:
            return BatchPlan(user_batch, user_batch * replicas, replicas / reference, notes)
    per, rest = divmod(script_global, replicas)
    if rest == 0:
        return BatchPlan(per, script_global, 1.0, notes)
    per = max(1, round(script_global / replicas))
    notes.append(
        f"the global batch {script_global} does not divide over {replicas} replicas: "
        f"per-device batch {per}, global batch {per * replicas} (not the script's)"
        + (f"; max_steps={max_steps} counts steps of {per * replicas} samples" if max_steps else "")
    )
    return BatchPlan(per, per * replicas, 1.0, notes)


class ElasticSampler(DistributedSampler):
    """``DistributedSampler``'s order, starting ``skip`` positions into epoch ``skip_epoch``
    the first time that epoch is read (the positions trained before a restart)."""

    def __init__(self, base: DistributedSampler, *, skip_epoch: int = -1, skip: int = 0):
        super().__init__(
            base.dataset,
            num_replicas=base.num_replicas,
            rank=base.rank,
            shuffle=base.shuffle,
            seed=base.seed,
            drop_last=base.drop_last,
        )
        self.epoch = base.epoch
        self.skip_epoch = skip_epoch
        self.skip = skip

    def _order(self) -> list[int]:
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(n, generator=g).tolist()

    def remaining(self) -> int:
        """Samples this rank reads in the next pass (the whole epoch after the first)."""
        skip = self.skip if self.epoch == self.skip_epoch else 0
        left = max(0, len(self.dataset) - skip)
        if self.drop_last:
            return left // self.num_replicas
        return math.ceil(left / self.num_replicas)

    def __iter__(self):
        indices = self._order()
        if self.skip and self.epoch == self.skip_epoch:
            indices = indices[self.skip :]
            self.skip = 0  # once: the next pass over this epoch number is a new epoch
        if not indices:
            return iter([])
        w = self.num_replicas
        if self.drop_last:
            indices = indices[: len(indices) - len(indices) % w]
        else:
            pad = -len(indices) % w
            indices += (indices * math.ceil(pad / len(indices)))[:pad]
        return iter(indices[self.rank :: w])
