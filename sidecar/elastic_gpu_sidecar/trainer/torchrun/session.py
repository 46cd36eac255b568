"""One rank of a torchrun script: the measuring hooks and the stop, wired before it runs.

Hooks, all global, none in the script: a post-hook on every optimizer's ``step`` (a step),
``torch.save`` (the script's checkpoint, noted by rank 0), ``Tensor.backward`` on rank 0 (the
loss: the last scalar the script differentiated, read only when a record is written), and
the data loaders (``loaders``).
"""

from __future__ import annotations

import sys

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from ... import protocol as P
from ...frameworks import resumes_itself
from .. import ranks, torchdist
from ..adapter import TrainerContext
from ..tlog import log
from . import savepoint
from .loaders import Feed
from .meter import Meter
from .stopping import Stopper


def _elastic(config: dict) -> bool:
    """Whether the script resumes itself from a checkpoint of its own (a plain loop on one
    device may too: it is then stopped and resumed like any other, on one GPU)."""
    try:
        with open(config["script"], encoding="utf-8") as f:
            return resumes_itself(f.read())
    except (KeyError, OSError, UnicodeDecodeError):
        return True


class TorchrunSession:
    def __init__(self, context: TrainerContext, ready_at: float) -> None:
        self.context = context
        self.ready_at = ready_at
        self.config = context.config
        self.leader = ranks.is_leader_rank()
        self.elastic = _elastic(self.config)
        start = savepoint.read(context.job) if self.elastic else None
        self.feed = Feed(start.epoch if start else None)
        world = torchdist.world_size()
        self.meter = Meter(context.job, context.generation, world, start, self.feed, ready_at)
        self.meter.on_first_step = self._describe_batch
        grace = ranks.stop_grace(self.config)
        self.stopper = Stopper(context.stop, self.meter, grace, self.elastic)
        self.stopper.install()
        self.feed.install()
        self._install_hooks()
        if self.leader:
            self._describe_start(start, world)

    # -- hooks --------------------------------------------------------------------------------
    def _install_hooks(self) -> None:
        meter, stopper = self.meter, self.stopper

        def after_step(optimizer, args, kwargs) -> None:
            if meter.counts(optimizer):
                meter.stepped()
                if meter.steps_here == 1:
                    self._hook_dcp()
                stopper.after_step()

        register_optimizer_step_post_hook(after_step)

        torch.save = torch.serialization.save = self._noting(torch.serialization.save)

        if self.leader:
            orig_backward = torch.Tensor.backward

            def backward(tensor, *args, **kwargs):
                if tensor.dim() == 0:
                    meter.loss = tensor.detach()
                return orig_backward(tensor, *args, **kwargs)

            torch.Tensor.backward = backward

    def _noting(self, orig):
        """``orig``, a save of the script's checkpoint, noted when it returns (rank 0), and
        never interrupted by the end of a stop's grace."""
        meter, stopper = self.meter, self.stopper
        note = self.leader and self.elastic

        def save(*args, **kwargs):
            stopper.begin_save()
            try:
                result = orig(*args, **kwargs)
                if note:
                    meter.saved()
                return result
            finally:
                stopper.save_done()

        save._elastic = True
        return save

    def _hook_dcp(self) -> None:
        """``torch.distributed.checkpoint.save`` too, where the script imported it (it takes
        seconds to import, so not before): FSDP scripts save with it."""
        dcp = sys.modules.get("torch.distributed.checkpoint")
        if dcp is None or getattr(dcp.save, "_elastic", False):
            return
        saver = sys.modules.get("torch.distributed.checkpoint.state_dict_saver")
        dcp.save = self._noting(dcp.save)
        if saver is not None:
            saver.save = dcp.save

    # -- what the log says --------------------------------------------------------------------
    def _describe_start(self, start, world: int) -> None:
        count = "1 rank" if world == 1 else f"{world} ranks"
        log(f"torchrun script on {count} ({torchdist.backend()}); the script is run as is")
        log(
            "checkpoints: the script's own (torch.save), the job's checkpoint interval does "
            "not apply; a stop sends the script SIGTERM, as torchrun's agent does"
        )
        if not self.elastic:
            log(
                "the script saves and loads no checkpoint of its own: it runs at one GPU "
                "count, and if it is stopped its work since the start is lost"
            )
        elif start is not None:
            log(
                f"the script's last save was at step {start.step} (generation "
                f"{start.generation}): it resumes from there, and so does the step count"
            )

    def _describe_batch(self) -> None:
        per_rank, world = self.feed.batch_size(), self.meter.world
        batch = self.meter.global_batch()
        if per_rank is None:
            size = "not known (no DataLoader with a batch size fed the first step)"
        else:
            size = f"{per_rank} per rank: global batch {per_rank} x {world} = {batch}"
        log(
            f"batch: the script's own, {size}; the global batch grows and shrinks with the "
            "ranks, as under torchrun, and the learning rate is the script's"
        )
        policy = P.BatchPolicy(self.config.get("batch_policy") or P.BatchPolicy.KEEP_GLOBAL)
        reference = self.config.get("reference_replicas")
        if policy == P.BatchPolicy.KEEP_GLOBAL:
            note = (
                "batch policy keep-global not applied: a torchrun script's batch is its own, "
                f"so the global batch is per-rank batch x {world} rank{'s' if world > 1 else ''}"
                + ("" if batch is None else f" = {batch}")
            )
        elif reference and int(reference) != world:
            note = (
                "batch policy keep-per-replica: the per-rank batch is kept, but the learning "
                f"rate is not scaled by {world}/{reference} ranks: it is the script's own"
            )
        else:
            note = None
        if note:
            log(note)
            self.meter.note = note

    # -- Session ------------------------------------------------------------------------------
    def on_stop_signal(self) -> None:
        self.stopper.on_stop_signal()

    def finalize(self) -> None:
        self.stopper.finalize()  # exits 75 when the script ended for a stop
        if self.leader:
            self.meter.report()
            log(f"the script finished at step {self.meter.global_step}")

    def wait_background(self) -> None:
        pass
