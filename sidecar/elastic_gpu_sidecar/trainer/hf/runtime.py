"""What one rank injects before the script runs: an elastic ``transformers.Trainer``.

Nothing in the script changes. ``install`` wraps three entry points:

* ``TrainingArguments.__post_init__``: the devices, before the arguments set up the process
  group: simulated GPUs train on the CPU with gloo, real ones on ``cuda:LOCAL_RANK`` with NCCL
  (the Trainer reads the rank and world size from torchrun's environment, which the leader
  set);
* ``Trainer.__init__``: the batch policy through the arguments (``batching``), and the
  ``ElasticCallback`` added last;
* ``Trainer.train``: each call gets an index; the interrupted call resumes from the job's
  checkpoint through ``resume_from_checkpoint`` (global step, epoch, optimizer, scheduler;
  the Trainer's own skip of trained batches lands on the next batch, see ``docs``), calls that
  had finished return their recorded result with their model restored, and a finished call is
  checkpointed so that a stop after it loses nothing.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import time

import transformers
from transformers.trainer_callback import TrainerState
from transformers.trainer_utils import TrainOutput

from ... import protocol as P
from ...jobdir import save_atomically
from .. import ranks, torchdist
from ..adapter import TrainerContext
from ..checkpoint import Checkpoint, CheckpointStore
from ..progress import LiveCounter, ProgressWriter, progress_interval, record
from ..stopsignal import exit_now
from ..tlog import log
from . import batching, checkpoints
from .callback import ElasticCallback

#: The final model, as ``Trainer.save_model`` writes it (``from_pretrained`` reads it).
MODEL_DIR = P.MODEL_DIR


def _jsonable(values: dict) -> dict:
    out = {}
    for k, v in (values or {}).items():
        try:
            json.dumps(v)
            out[k] = v
        except (TypeError, ValueError):
            out[k] = str(v)
    return out


def loss_ignores_count(model) -> bool:
    """Whether the model's ``forward`` computes its loss without the number of items in the
    batch (its own mean over the micro-batch), read from its source; False when unsure."""
    try:
        source = inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        return False
    return "loss" in source and not any(
        word in source for word in ("num_items_in_batch", "loss_function")
    )


class Runtime:
    """One rank's job, grant, checkpoint store and progress files."""

    def __init__(self, context: TrainerContext, ready_at: float):
        self.job = context.job
        self.config = context.config
        self.generation = context.generation
        self.stop = context.stop
        self.ready_at = ready_at
        self.world = torchdist.world_size()
        self.leader = ranks.is_leader_rank()
        self.policy = P.BatchPolicy(self.config.get("batch_policy") or P.BatchPolicy.KEEP_GLOBAL)
        self.reference = int(self.config.get("reference_replicas") or self.world)
        interval = self.config.get("checkpoint_interval") or P.DEFAULT_CHECKPOINT_INTERVAL_S
        self.checkpoint_interval = float(interval)
        self.progress_interval = progress_interval()
        self.store = CheckpointStore(self.job / P.CHECKPOINTS, log=self.say)
        self.plan: batching.BatchPlan | None = None
        self.note: str | None = None
        self.lr_scale = 1.0  # applied to the script's learning rate
        self.train_count = 0
        self.call: int | None = None
        self.completed: dict[str, dict] = {}
        self.last_trainer = None
        self.first_reported = False
        self._devices_said = False
        self._samples_base, self._step_base = 0, 0
        self.steps_per_epoch: int | None = None
        if self.leader:
            self.store.clean_partial()
            checkpoints.clean_staging(self.store)
            self.writer = ProgressWriter(self.job.path)
            self.live = LiveCounter(self.job.path)
        self.resume = self._latest()

    def say(self, message: str) -> None:
        if self.leader:
            log(message)

    def _latest(self) -> Checkpoint | None:
        ckpt = self.store.latest()
        if ckpt is None:
            return None
        m = ckpt.meta
        if m.get("format") != checkpoints.FORMAT:
            self.say(f"{ckpt.name} was not written by the Trainer adapter; ignoring it")
            return None
        self.completed = dict(m.get("completed") or {})
        self.say(
            f"resuming from {ckpt.name} ({m.get('reason')}): train call {m['train_call']}, "
            f"global step {m['global_step']}, epoch {m.get('epoch') or 0:.3f}"
            + (" (that call had finished)" if m.get("done") else "")
        )
        return ckpt

    # -- devices and batch ------------------------------------------------------------------
    def set_devices(self, args) -> None:
        """Before the arguments set up the process group (``TrainingArguments.__post_init__``)."""
        if torchdist.backend() == "gloo":  # simulated GPUs, or no CUDA: CPU processes
            args.use_cpu = True
            where = "CPU (simulated GPUs)" if torchdist.simulated() else "CPU"
        elif args.use_cpu:  # the script's choice, on a grant of real GPUs
            where = "CPU (the script's use_cpu=True)"
        else:
            where = f"cuda:{os.environ.get('LOCAL_RANK', '0')} and the other granted GPUs"
        args.ddp_backend = "gloo" if args.use_cpu else "nccl"
        if not self._devices_said:
            self._devices_said = True
            self.say(f"Trainer on {self.world} process(es), {where}, backend {args.ddp_backend}")

    def apply_batch_policy(self, args, own_optimizer: bool) -> None:
        """Set the per-device batch, accumulation and learning rate for this world size."""
        script = getattr(args, "_elastic_script", None)  # the same arguments may serve twice
        if script is None:
            script = (
                args.per_device_train_batch_size,
                args.gradient_accumulation_steps,
                args.learning_rate,
            )
            args._elastic_script = script
        per_device, accumulation, lr = script
        plan = batching.plan(self.policy, per_device, accumulation, self.world, self.reference)
        args.per_device_train_batch_size = plan.per_device
        args.gradient_accumulation_steps = plan.accumulation
        notes = [plan.note] if plan.note else []
        self.lr_scale = 1.0
        if plan.lr_scale != 1.0:
            if own_optimizer:
                notes.append("learning rate not scaled: the script passes its own optimizer")
            else:
                args.learning_rate = lr * plan.lr_scale
                self.lr_scale = plan.lr_scale
        self.say(plan.describe(self.policy))
        epochs = self.config.get("epochs")
        if epochs and args.num_train_epochs != int(epochs):
            args.num_train_epochs = int(epochs)
            self.say(
                f"num_train_epochs={int(epochs)} (the job's --epochs)"
                + (
                    f"; the script's max_steps={args.max_steps} overrides it, as in the Trainer"
                    if args.max_steps > 0
                    else ""
                )
            )
        if args.max_steps > 0 and plan.global_batch != plan.reference_global:
            self.say(
                f"max_steps={args.max_steps} counts optimizer steps as the Trainer does: at global "
                f"batch {plan.global_batch} instead of the script's {plan.reference_global}, "
                f"each of them trains {plan.global_batch / plan.reference_global:g} x the samples"
            )
        for note in notes:
            self.say(note)
        self.plan = plan
        self.note = "; ".join(notes) or None

    def attach(self, trainer) -> None:
        trainer.add_callback(ElasticCallback(self, trainer))
        if getattr(trainer, "model_accepts_loss_kwargs", False) and loss_ignores_count(
            trainer.model
        ):
            # The Trainer takes such a model's loss for a sum over the global batch: it skips
            # the division by the accumulation steps and multiplies by the world size, so the
            # gradient would grow with both. A mean loss is averaged like any other instead.
            trainer.model_accepts_loss_kwargs = False
            self.say(
                f"{type(trainer.model).__name__}'s loss is a mean that ignores num_items_in_batch:"
                " averaged over accumulation steps and replicas, so the gradient does not depend"
                " on the replica count"
            )
        original = trainer._load_optimizer_and_scheduler

        def load_optimizer_and_scheduler(checkpoint):
            original(checkpoint)
            self._rescale_lr(trainer, checkpoint)

        trainer._load_optimizer_and_scheduler = load_optimizer_and_scheduler

    def _rescale_lr(self, trainer, checkpoint) -> None:
        """The optimizer and scheduler restored the learning rate of the checkpoint's world
        size: set this one's (keep-per-replica)."""
        if checkpoint is None or self.resume is None or self.plan is None:
            return
        factor = self.lr_scale / float(self.resume.meta.get("lr_scale") or 1.0)
        if factor == 1.0 or trainer.optimizer is None:
            return
        for group in trainer.optimizer.param_groups:
            for key in ("lr", "initial_lr"):
                if isinstance(group.get(key), float):
                    group[key] *= factor
        sched = trainer.lr_scheduler
        if sched is not None and hasattr(sched, "base_lrs"):
            sched.base_lrs = [lr * factor for lr in sched.base_lrs]
        self.say(
            f"learning rate x{factor:g} of the checkpoint's ({self.resume.meta['replicas']} "
            f"-> {self.world} replicas)"
        )

    # -- train --------------------------------------------------------------------------------
    def train(self, orig, trainer, *args, **kwargs):
        bound = inspect.signature(orig).bind(trainer, *args, **kwargs)
        k = self.train_count
        self.train_count += 1
        m = self.resume.meta if self.resume is not None else None
        if m is not None and (k < m["train_call"] or (k == m["train_call"] and m.get("done"))):
            return self._finished(trainer, k)
        if m is not None and k == m["train_call"]:
            given = bound.arguments.get("resume_from_checkpoint")
            if given not in (None, False):
                self.say(f"resume_from_checkpoint={given!r} of the script: the job's own is used")
            bound.arguments["resume_from_checkpoint"] = str(self.resume.path)
            self._check_resume(m)
        self.stop.busy += 1
        try:
            if torchdist.agree(self.stop.requested):
                self.exit_stopped(f"before train call {k}")
            self.call, self.last_trainer = k, trainer
            out = orig(*bound.args, **bound.kwargs)
            self.completed[str(k)] = {
                "global_step": out.global_step,
                "training_loss": out.training_loss,
                "metrics": _jsonable(out.metrics),
            }
            self.checkpoint(trainer, "train call finished", done=True)
        finally:
            self.stop.busy -= 1
        if torchdist.agree(self.stop.requested):
            self.exit_stopped(f"after train call {k}")
        return out

    def _check_resume(self, m: dict) -> None:
        """Whether the Trainer's skip of trained batches lands exactly (it counts optimizer
        steps: exact while an optimizer step is the same samples as before the restart)."""
        if self.plan is None or m.get("global_batch") in (None, self.plan.global_batch):
            return
        note = (
            f"the global batch changed from {m['global_batch']} to {self.plan.global_batch}: "
            f"the Trainer resumes the epoch after {m['global_step']} of its optimizer steps, "
            "so the resumed epoch's position is counted in steps of the new size, not samples"
        )
        self.say(note)
        self.note = "; ".join(filter(None, [self.note, note]))

    def _finished(self, trainer, k: int):
        m = self.resume.meta
        out = self.completed.get(str(k)) or {}
        if k == m["train_call"]:
            path = str(self.resume.path)
            trainer._load_from_checkpoint(path)
            trainer.state = TrainerState.load_from_json(os.path.join(path, "trainer_state.json"))
            self.last_trainer = trainer
            self.say(
                f"train call {k} finished before the restart: restored from {self.resume.name}"
            )
        else:
            self.say(
                f"train call {k} finished before the restart: skipped (train call "
                f"{m['train_call']} restores the model)"
            )
        return TrainOutput(
            out.get("global_step", 0), out.get("training_loss", 0.0), out.get("metrics", {})
        )

    def train_began(self, step: int, steps_per_epoch: int | None) -> None:
        m = self.resume.meta if self.resume is not None else {}
        if m.get("train_call") == self.call and step == m.get("global_step"):
            self._samples_base = int(m.get("samples") or 0)
            old = m.get("steps_per_epoch")
            if old and steps_per_epoch and old != steps_per_epoch:
                note = (
                    f"an epoch is {steps_per_epoch} optimizer steps now, {old} before the "
                    "restart: the resumed epoch's position is not exact"
                )
                self.say(note)
                self.note = "; ".join(filter(None, [self.note, note]))
        self._step_base = step
        self.steps_per_epoch = steps_per_epoch

    def samples_at(self, step: int) -> int:
        batch = self.plan.global_batch if self.plan else 0
        return self._samples_base + (step - self._step_base) * batch

    # -- checkpoints, progress, stop ----------------------------------------------------------
    def checkpoint(self, trainer, reason: str, done: bool = False) -> None:
        st = trainer.state
        meta = {
            "reason": reason,
            "train_call": self.call,
            "done": done,
            "global_step": st.global_step,
            "epoch": st.epoch,
            "generation": self.generation,
            "replicas": self.world,
            "global_batch": self.plan.global_batch if self.plan else None,
            "steps_per_epoch": self.steps_per_epoch,
            "lr_scale": self.lr_scale,
            "samples": self.samples_at(st.global_step),
            "completed": self.completed,
        }
        t0 = time.monotonic()
        ckpt = checkpoints.save(trainer, self.store, meta, leader=self.leader)
        if ckpt is not None:
            self.say(
                f"checkpoint {ckpt.name} at global step {st.global_step} ({reason}) in "
                f"{time.monotonic() - t0:.2f} s"
            )

    def report(self, **fields) -> None:
        self.writer.write(record(generation=self.generation, replicas=self.world, **fields))

    def exit_stopped(self, why: str) -> None:
        since = self.stop.requested_at
        ago = f", {time.time() - since:.3f} s after the request" if since else ""
        self.say(f"stopping for the sidecar ({why}{ago}); exit {P.TRAINER_STOPPED}")
        exit_now(P.TRAINER_STOPPED)

    def on_stop_signal(self) -> None:
        """In the signal thread: with no training in flight there is nothing to save."""
        if self.stop.busy == 0:
            self.exit_stopped("no training step in flight")

    def wait_background(self) -> None:
        """Checkpoints are written in the training loop: nothing runs behind it."""

    def finalize(self) -> None:
        """Rank 0 saves the last trained model with ``Trainer.save_model`` (atomically)."""
        if not self.leader:
            return
        trainer = self.last_trainer
        if trainer is None:
            self.say("the script never trained a Trainer: no model saved")
            return
        final = self.job / MODEL_DIR
        t0 = time.monotonic()
        save_atomically(final, lambda tmp: trainer.save_model(str(tmp)))
        self.say(f"final model saved to {final} in {time.monotonic() - t0:.2f} s")


def install(rt: Runtime) -> None:
    """Wrap ``TrainingArguments.__post_init__``, ``Trainer.__init__`` and ``Trainer.train``."""
    args_cls, trainer_cls = transformers.TrainingArguments, transformers.Trainer
    if getattr(trainer_cls.train, "_elastic", False):
        return
    post_init, init, train = args_cls.__post_init__, trainer_cls.__init__, trainer_cls.train

    @functools.wraps(post_init)
    def __post_init__(self, *a, **kw):
        rt.set_devices(self)
        return post_init(self, *a, **kw)

    @functools.wraps(init)
    def __init__(self, *a, **kw):
        bound = inspect.signature(init).bind(self, *a, **kw)
        if bound.arguments.get("args") is None:
            bound.arguments["args"] = args_cls(output_dir="tmp_trainer")
        optimizers = bound.arguments.get("optimizers") or (None, None)
        rt.apply_batch_policy(bound.arguments["args"], own_optimizer=optimizers[0] is not None)
        init(*bound.args, **bound.kwargs)
        rt.attach(self)

    @functools.wraps(train)
    def elastic_train(self, *a, **kw):
        return rt.train(train, self, *a, **kw)

    elastic_train._elastic = True
    args_cls.__post_init__ = __post_init__
    trainer_cls.__init__ = __init__
    trainer_cls.train = elastic_train
