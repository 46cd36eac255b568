"""One ``Trainer.fit`` call made elastic: its input, its position, its checkpoints.

Lightning makes the training ``DataLoader`` of each rank again for DDP (a ``DistributedSampler``
in the script's ``DataLoader``); ``elastic_loader`` then sets the per-device batch the job's
batch policy gives for the grant (``batching.plan``) and the sampler that starts an interrupted
epoch after the samples trained before the restart (``batching.ElasticSampler``). A checkpoint
is Lightning's own (``Trainer.save_checkpoint``: weights, optimizer, LR schedulers, loop
counters, callbacks), written by rank 0 into the job's ``CheckpointStore`` with the position in
its meta, at a batch boundary every rank agreed on.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import TYPE_CHECKING

from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

from .. import torchdist
from ..tlog import log
from . import batching
from .callback import make_callback

if TYPE_CHECKING:
    from .runtime import Runtime

#: Lightning's checkpoint inside a checkpoint of the store.
CKPT_FILE = "lightning.ckpt"
_NOT_RESUMABLE = "You're resuming from a checkpoint that ended before the epoch ended"


class FitSession:
    def __init__(self, rt: Runtime, trainer, k: int, resume: dict | None):
        self.rt = rt
        self.trainer = trainer
        self.k = k
        self.resume = resume
        self.plan: batching.BatchPlan | None = None
        self.sampler: batching.ElasticSampler | None = None
        self.notes: list[str] = []
        self.steps_since_save = 0
        self.next_periodic = time.monotonic() + rt.checkpoint_interval
        self.stop_agreed = False
        # the epoch being trained and the samples of it trained (in this and earlier processes)
        self.epoch = int(resume["epoch"]) if resume else 0
        self.samples_in_epoch = int(resume.get("samples_in_epoch") or 0) if resume else 0
        self.lr_scale = float(resume.get("lr_scale") or 1.0) if resume else 1.0
        self.resumed_step = 0
        self.callback = make_callback(type(trainer), self)

    def note(self, message: str) -> None:
        self.rt.say(f"fit {self.k}: {message}")
        self.notes.append(message)

    # -- input ------------------------------------------------------------------------------------
    def elastic_loader(self, user_dl, dl):
        """The training ``DataLoader`` Lightning made for this rank, with the grant's batch."""
        if (
            not isinstance(dl, DataLoader)
            or type(dl.sampler) is not DistributedSampler
            or getattr(user_dl, "batch_size", None) is None
        ):
            self.note(
                "the training data has its own sampler or batch sampler (or is iterable): it is "
                "used as it is, the batch policy is not applied, and a restart mid-epoch reads "
                "that epoch from its start"
            )
            return dl
        trainer = self.trainer
        max_steps = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None
        plan = batching.plan(
            int(user_dl.batch_size),
            replicas=self.rt.replicas,
            reference=self.rt.reference,
            policy=self.rt.policy,
            max_steps=max_steps,
        )
        self.plan = plan
        self.rt.say(f"fit {self.k}: " + plan.describe(self.rt.policy, self.rt.replicas))
        for n in plan.notes:
            self.note(n)
        skip_epoch, skip = (self.epoch, self.samples_in_epoch) if self.resume else (-1, 0)
        sampler = batching.ElasticSampler(dl.sampler, skip_epoch=skip_epoch, skip=skip)
        if self.resume:
            # worker processes read ahead when Lightning makes the iterator, before it sets the
            # epoch, and a resumed epoch's iterator is not made again
            sampler.set_epoch(skip_epoch)
        if skip:
            # Lightning warns that a plain DataLoader does not resume mid-epoch: this one does
            warnings.filterwarnings("ignore", message=_NOT_RESUMABLE)
        # a DataLoader refuses these once made; the iterator reads them when it starts
        object.__setattr__(dl, "sampler", sampler)
        object.__setattr__(
            dl, "batch_sampler", BatchSampler(sampler, plan.per_device, dl.drop_last)
        )
        object.__setattr__(dl, "batch_size", plan.per_device)
        self.sampler = sampler
        return dl

    def keep_logger_step(self) -> None:
        """Lightning counts one more logged step on a restart, for a checkpoint written before
        that step's count was (``on_train_batch_end``, as ``ModelCheckpoint`` does); ours is
        written after it (before the next batch), so the count it adds is taken back."""
        loop = self.trainer.fit_loop.epoch_loop
        if self.resume is None or not isinstance(getattr(loop, "_batches_that_stepped", None), int):
            return
        if (
            loop.restarting
            and not loop._should_accumulate()
            and (loop.restarted_on_train_batch_end or not loop.restarted_on_last)
        ):
            loop._batches_that_stepped -= 1

    def renumber(self) -> None:
        """A resumed epoch whose global batch changed (keep-per-replica, a batch that does not
        divide): its batches are counted so that the epoch ends where its samples do."""
        if not (self.resume and self.sampler and self.plan):
            return
        if self.resume.get("global_batch") in (None, self.plan.global_batch):
            return
        n = self.trainer.num_training_batches
        if not math.isfinite(n):
            return
        left = self.sampler.remaining()
        per = self.plan.per_device
        batches = left // per if self.trainer.train_dataloader.drop_last else math.ceil(left / per)
        done = max(0, int(n) - batches)
        current = self.trainer.fit_loop.epoch_loop.batch_progress.current
        current.ready = current.started = current.processed = current.completed = done
        self.note(
            f"the global batch changed ({self.resume['global_batch']} -> "
            f"{self.plan.global_batch}): the rest of the epoch is numbered from batch {done}"
        )

    def scale_learning_rate(self) -> None:
        """keep-per-replica: the script's learning rate x replicas / reference replicas."""
        target = self.plan.lr_scale if self.plan else 1.0
        if target == self.lr_scale:
            return
        f = target / self.lr_scale
        for opt in self.trainer.optimizers:
            for group in opt.param_groups:
                group["lr"] *= f
                if "initial_lr" in group:
                    group["initial_lr"] *= f
        for config in self.trainer.lr_scheduler_configs:
            if hasattr(config.scheduler, "base_lrs"):
                config.scheduler.base_lrs = [lr * f for lr in config.scheduler.base_lrs]
        self.rt.say(f"fit {self.k}: learning rate x{target:g} of the script's")
        self.lr_scale = target

    # -- position and checkpoints -----------------------------------------------------------------
    def position(self) -> dict:
        trainer = self.trainer
        epoch = trainer.current_epoch
        batch = trainer.fit_loop.epoch_loop.batch_progress.current.completed
        samples = self.samples_in_epoch if epoch == self.epoch else 0
        return {"epoch": epoch, "batch": batch, "samples_in_epoch": samples}

    def checkpoint(self, reason: str, *, fit_done: bool = False):
        """Every rank: Lightning's checkpoint, written and committed by rank 0 (returned there)."""
        t0 = time.monotonic()
        trainer = self.trainer
        rt = self.rt
        meta = dict(
            self.position(),
            version=1,
            reason=reason,
            generation=rt.generation,
            replicas=rt.replicas,
            fit_index=self.k,
            fit_done=fit_done,
            global_step=trainer.global_step,
            samples=rt.samples,
            global_batch=self.plan.global_batch if self.plan else None,
            batch_policy=rt.policy,
            lr_scale=self.lr_scale,
            done_fits=rt.done_fits,
            references=sorted(rt.done_fits.values()),
        )
        ckpt = None
        if rt.leader:
            ckpt = rt.store.write({CKPT_FILE: trainer.save_checkpoint}, meta)
            log(
                f"checkpoint {ckpt.name} ({reason}) at epoch {meta['epoch'] + 1}, batch "
                f"{meta['batch']}, step {meta['global_step']} in {time.monotonic() - t0:.3f} s"
            )
        else:  # Lightning writes on rank 0 only; the other ranks join its collectives
            trainer.save_checkpoint(rt.store.root / ".not-written.ckpt")
        trainer.strategy.barrier("elastic-checkpoint")  # committed before any rank goes on
        self.steps_since_save = 0
        return ckpt

    def at_boundary(self) -> None:
        """Before each batch, on every rank: stop, or checkpoint, when the ranks agree to."""
        due = False
        # one collective per batch; a second only when some rank wants to stop or save
        if torchdist.agree(self.rt.stop.requested or time.monotonic() >= self.next_periodic):
            stop = torchdist.agree(self.rt.stop.requested)
            self.stop_agreed |= stop
            due = not stop
        trainer = self.trainer
        done = trainer.fit_loop.epoch_loop.batch_progress.current.completed
        if done % max(1, trainer.accumulate_grad_batches):
            return  # gradients of the batches since the last optimizer step are not saved
        if self.stop_agreed:
            if self.steps_since_save:
                self.checkpoint("stop requested")
            pos = self.position()
            self.callback.report(stopped=True)
            trainer.strategy.barrier("elastic-stop")
            self.rt.exit_stopped(
                f"fit {self.k}, epoch {pos['epoch'] + 1}, batch {pos['batch']}, "
                f"step {trainer.global_step}"
            )
        if due:
            if self.steps_since_save:
                self.checkpoint("periodic")
            self.next_periodic = time.monotonic() + self.rt.checkpoint_interval

    def batch_done(self) -> int:
        """After each batch, on every rank: count the samples it trained; returns them."""
        epoch = self.trainer.current_epoch
        if epoch != self.epoch:
            self.epoch, self.samples_in_epoch = epoch, 0
        gb = self.plan.global_batch if self.plan else 0
        if self.sampler is not None:
            gb = min(gb, max(0, len(self.sampler.dataset) - self.samples_in_epoch))
        self.samples_in_epoch += gb
        self.rt.samples += gb
        self.steps_since_save += 1
        return gb
