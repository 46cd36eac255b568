"""One ``fit`` call of the user's script, made resumable.

A ``FitSession`` plans the input (see inputs.py), restores the checkpoint of an interrupted
call, runs Keras' own ``fit`` once or twice (the rest of an interrupted epoch, then the
remaining epochs) with the elastic callbacks added, and writes the checkpoints: periodic ones
in the background, one on a stop request, one when the call finishes. The user's callbacks
see one uninterrupted, unresized ``fit`` (see ``UserCallback`` in callback.py).
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING

import keras
import numpy as np

from ... import protocol as P
from ..tlog import log
from . import inputs, modelstate
from .batching import LearningRateScale, describe
from .callback import ElasticCallback, ElasticProgbar, Numbering, UserCallback

if TYPE_CHECKING:
    from .bootstrap import Runtime

STATE_FILE = "state.npz"


def sample_batch(fargs: dict):
    x = fargs["x"]
    kind = inputs.classify(x)
    if kind == "dataset":
        return next(iter(x.take(1)))  # a tf.data.Dataset
    if kind == "arrays":

        def take(t):
            if t is None:
                return None
            return keras.tree.map_structure(lambda a: np.asarray(a)[:2], inputs.tuples(t))

        parts = [take(fargs["x"]), take(fargs["y"])]
        return tuple(p for p in parts if p is not None)
    if hasattr(x, "__getitem__"):
        return x[0]
    if hasattr(x, "__next__"):
        return next(x)  # this fit call is skipped: its generator is not used otherwise
    raise RuntimeError(f"cannot build the model from an input of type {type(x).__name__}")


def make_history(model, hist: dict, fargs: dict):
    h = keras.callbacks.History()
    h.set_model(model)
    h.epoch = list(hist.get("epoch") or [])
    h.history = {k: list(v) for k, v in (hist.get("history") or {}).items()}
    h.set_params({"epochs": fargs.get("epochs"), "verbose": fargs.get("verbose")})
    model.history = h
    return h


class FitSession:
    def __init__(self, rt: Runtime, model, k: int, slot: int, fargs: dict, resume: dict | None):
        self.rt = rt
        self.model = model
        self.k = k
        self.slot = slot
        self.fargs = fargs
        self.resume = resume
        self.epochs = int(fargs["epochs"])
        initial = int(fargs.get("initial_epoch") or 0)
        if resume is not None:
            self.start_epoch = max(initial, int(resume["epoch"]))
            batch, samples = int(resume["batch"]), int(resume.get("samples_in_epoch") or 0)
            self.history = resume.get("history") or {"epoch": [], "history": {}}
            self.lr_start = float(resume.get("lr_scale") or 1.0)
        else:
            self.start_epoch, batch, samples = initial, 0, 0
            self.history = {"epoch": [], "history": {}}
            self.lr_start = 1.0
        self.plan = inputs.plan(
            fargs,
            start_epoch=self.start_epoch,
            start_batch=batch,
            start_samples=samples,
            epochs=self.epochs,
            replicas=rt.replicas,
            reference_replicas=rt.reference,
            policy=rt.policy,
            seed=rt.seed + 7919 * k,
        )
        target = rt.replicas / rt.reference if rt.policy == P.BatchPolicy.KEEP_PER_REPLICA else 1.0
        self.lr = LearningRateScale(
            self.lr_start, target, int(rt.config.get("lr_warmup_steps") or 0), log
        )
        self.resumed_step: int | None = None
        self.noise = None  # the GradientNoise meter, when the job measures one
        self._metrics: dict | None = None
        self.cb: ElasticCallback | None = None
        user_batch = fargs.get("batch_size") or (
            inputs.KERAS_DEFAULT_BATCH if self.plan.kind == "arrays" else self.plan.global_batch
        )
        if self.plan.kind == "dataset" and self.plan.global_batch is not None:
            from .tfinputs import dataset_batch

            user_batch = dataset_batch(fargs["x"])
        log(f"fit {k}: " + describe(rt.policy, user_batch, self.plan.global_batch, rt.replicas))
        for note in self.plan.notes:
            log(f"fit {k}: {note}")

    def restore(self) -> None:
        if self.resume is None:
            return
        t0 = time.monotonic()
        modelstate.ensure_built(self.model, self.plan.sample_batch)
        arrays = modelstate.load(self.rt.resume.file(STATE_FILE))
        for group in ("model", "optimizer"):
            modelstate.assign_group(self.model, group, arrays)
        self._metrics = arrays
        log(
            f"fit {self.k}: restored {self.rt.resume.name} in {time.monotonic() - t0:.2f} s; "
            f"resuming at epoch {self.start_epoch + 1}, batch {self.plan.first_offset}"
        )

    def measure_noise(self):
        """The model's gradient noise meter, installed on its first fit in this process when
        the job asks for one (``--measure-noise``); None otherwise, or where it cannot be
        measured (the reason goes to the log and the job's note)."""
        rt = self.rt
        if not rt.config.get("measure_noise"):
            return None
        if id(self.model) in rt.noise:
            return rt.noise[id(self.model)]
        from .gradnoise import GradientNoise

        meter: GradientNoise | None = GradientNoise(self.model)
        modelstate.ensure_built(self.model, self.plan.sample_batch)
        why = meter.install()
        if why is not None:
            log(f"fit {self.k}: {why}")
            rt.note = "; ".join(filter(None, [rt.note, why]))
            meter = None
        else:
            log(f"fit {self.k}: measuring the gradient noise scale (differencing estimator)")
        rt.noise[id(self.model)] = meter
        return meter

    def restore_metrics(self) -> None:
        if self._metrics is not None and self.plan.first_samples + self.plan.first_offset > 0:
            try:
                modelstate.assign_group(self.model, "metrics", self._metrics)
            except modelstate.RestoreMismatch as e:
                log(f"running metrics not restored ({e})")
        self._metrics = None

    def add_history(self, epoch: int, logs: dict) -> None:
        self.history["epoch"].append(epoch)
        for key, value in logs.items():
            self.history["history"].setdefault(key, []).append(value)

    # -- checkpoints --------------------------------------------------------------------------------
    def _meta(self, reason: str, fit_done: bool) -> dict:
        pos = (
            self.cb.position()
            if self.cb
            else {"epoch": self.start_epoch, "batch": 0, "samples_in_epoch": 0, "global_step": None}
        )
        if fit_done:
            pos = dict(pos, epoch=self.epochs, batch=0, samples_in_epoch=0)
        refs = [
            s["checkpoint"] for slot, s in self.rt.slot_states.items() if slot != str(self.slot)
        ]
        return dict(
            pos,
            version=1,
            reason=reason,
            generation=self.rt.generation,
            replicas=self.rt.replicas,
            fit_index=self.k,
            fit_done=fit_done,
            slot=self.slot,
            samples=self.rt.samples,
            history=self.history,
            lr_scale=self.lr.applied,
            global_batch=self.plan.global_batch,
            batch_policy=self.rt.policy,
            completed=self.rt.completed,
            slot_states=self.rt.slot_states,
            references=refs,
        )

    def checkpoint(self, reason: str, *, background: bool = False, fit_done: bool = False):
        if background and self.rt.bg is not None and self.rt.bg.is_alive():
            return None  # the previous periodic checkpoint is still being written
        self.rt.wait_background()
        t0 = time.monotonic()
        arrays, layout = modelstate.capture(self.model)
        meta = json.loads(json.dumps(self._meta(reason, fit_done), default=float))
        files = {
            STATE_FILE: modelstate.save_npz(arrays),
            "layout.json": json.dumps(layout).encode(),
        }

        def write():
            ckpt = self.rt.store.write(files, meta)
            log(
                f"checkpoint {ckpt.name} ({reason}) at epoch {meta['epoch'] + 1}, batch "
                f"{meta['batch']}, step {meta['global_step']} in {time.monotonic() - t0:.3f} s"
            )
            return ckpt

        if background:
            self.rt.bg = threading.Thread(target=write, name="checkpoint", daemon=True)
            self.rt.bg.start()
            return None
        return write()

    def stop_now(self, save: bool) -> None:
        self.cb.report(stopped=True)  # where it stopped, for people and the sidecar
        if save:
            self.checkpoint("stop requested")
        self.rt.exit_stopped(
            f"fit {self.k}, epoch {self.cb.epoch + 1}, batch {self.cb.batch_in_epoch}"
        )

    # -- running ------------------------------------------------------------------------------------
    def run(self, orig):
        self.rt.session = self
        self.rt.safe = "clean"  # nothing trained yet in this process
        try:
            return self._run(orig)
        finally:
            self.rt.session = None
            self.rt.safe = None

    def _run(self, orig):
        self.restore()
        self.noise = self.measure_noise()
        self.cb = ElasticCallback(self)
        user = self.fargs.get("callbacks") or []
        if isinstance(user, keras.callbacks.CallbackList):
            user = user.callbacks
        user = list(user)
        segments = self.plan.segments
        model = self.model
        numbering = Numbering.of(self.plan, self.start_epoch, self.epochs)
        # Keras' own view is right for a plain run: one call, batches numbered as the script's
        view = len(segments) > 1 or not numbering.identity
        has_bar = any(isinstance(c, keras.callbacks.ProgbarLogger) for c in user)
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            cbs = user
            if view:
                cbs = [UserCallback.wrap(c, numbering, begin=i == 0, end=last) for c in user]
            ours = [self.lr, self.cb]
            if view and seg.get("verbose", "auto") != 0 and not has_bar:
                ours.insert(0, ElasticProgbar(numbering))
            orig(model, **dict(seg, callbacks=[self.cb.gate, *cbs, *ours]))
            if model.stop_training:
                if view and not last:  # stopped early: the user's callbacks still get one end
                    for c in cbs:
                        c.end_now()
                break
        self.rt.completed[str(self.k)] = {"slot": self.slot, "history": self.history}
        ckpt = self.checkpoint("fit finished", fit_done=True)
        self.rt.slot_states[str(self.slot)] = {"checkpoint": ckpt.name, "fit": self.k}
        # later checkpoints belong to later fits: this one must not be resumed as "in progress"
        self.rt.resume = ckpt
        history = make_history(model, self.history, self.fargs)
        if self.rt.stop.requested:
            self.rt.exit_stopped(f"after fit {self.k}")
        return history
