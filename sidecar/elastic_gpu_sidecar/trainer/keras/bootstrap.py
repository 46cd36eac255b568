"""What the trainer injects before the user's code runs: an elastic ``keras.Model.fit``.

Nothing in the user's script changes. ``install`` replaces ``keras.Model.fit`` by a wrapper
that gives each call an index and hands it to a ``FitSession`` (session.py), which restores
the job's checkpoint, resumes at the exact batch, reports progress, checkpoints periodically
and on a stop request. The ``Runtime`` holds what lives as long as the trainer process: the
grant, the checkpoint store, the progress files, the stop request, and the last model trained
(saved when the script ends).

A restart re-runs the script from the top: the calls that had finished return their recorded
result (their model restored), the interrupted one resumes, later ones run normally.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import time

import keras

from ... import protocol as P
from ...jobdir import JobDir, save_atomically
from ..checkpoint import Checkpoint, CheckpointStore
from ..progress import LiveCounter, ProgressWriter, progress_interval, record
from ..stopsignal import StopRequest, exit_now
from ..tlog import log
from . import modelstate
from .backends import current as backend
from .session import STATE_FILE, FitSession, make_history, sample_batch


# -- the per-process runtime ----------------------------------------------------------------------
class Runtime:
    """State of one trainer process: grant, checkpoint store, progress, fit bookkeeping."""

    def __init__(
        self,
        job: JobDir,
        config: dict,
        generation: int,
        gpus: list[str],
        stop: StopRequest,
        replicas: int | None = None,
    ):
        self.job = job
        self.config = config
        self.generation = generation
        self.gpus = gpus
        self.replicas = len(gpus) if replicas is None else replicas
        #: Said in every progress record when training does not use the whole grant.
        self.note: str | None = None
        self.noise: dict[int, object] = {}  # GradientNoise meters by id(model) (session.py)
        if self.replicas < len(gpus):
            self.note = (
                f"training on {self.replicas} of the {len(gpus)} granted devices (Keras on "
                f"{backend().label}: see the trainer log)"
            )
        self.stop = stop
        self.pid = os.getpid()
        interval = config.get("checkpoint_interval") or P.DEFAULT_CHECKPOINT_INTERVAL_S
        self.checkpoint_interval = float(interval)
        self.progress_interval = progress_interval()
        self.policy = P.BatchPolicy(config.get("batch_policy") or P.BatchPolicy.KEEP_GLOBAL)
        self.reference = int(config.get("reference_replicas") or self.replicas)
        if not backend().elastic:
            self.reference = self.replicas  # one device whatever the grant: one batch size
        self.seed = int(config.get("seed") or 0)
        self.epochs_override = config.get("epochs")
        self.store = CheckpointStore(job / P.CHECKPOINTS, log=log)
        self.writer = ProgressWriter(job.path)
        self.live = LiveCounter(job.path)
        self.fit_count = 0
        self.slots: dict[int, int] = {}
        self._models: list = []  # keeps models alive so their ids stay unique
        self.completed: dict[str, dict] = {}  # fit index -> {"slot", "history"}
        self.slot_states: dict[str, dict] = {}  # model slot -> {"checkpoint", "fit"}
        self.samples = 0
        self.last_model = None
        self.first_step_reported = False
        self.ready_at: float | None = None  # wall time the framework was imported (first record)
        self.session: FitSession | None = None  # the fit in progress
        self.safe: str | None = None  # "clean" | "save" | None: see callback.py
        self.safe_lock = threading.Lock()
        self.bg: threading.Thread | None = None
        self.resume: Checkpoint | None = None
        self.store.clean_partial()
        ckpt = self.store.latest()
        if ckpt is not None and not isinstance(ckpt.meta.get("fit_index"), int):
            log(f"{ckpt.name} holds no training position (not written by a trainer); ignoring it")
            ckpt = None
        if ckpt is not None:
            self.resume = ckpt
            m = ckpt.meta
            self.completed = dict(m.get("completed") or {})
            self.slot_states = dict(m.get("slot_states") or {})
            self.samples = int(m.get("samples") or 0)
            log(
                f"resuming from {ckpt.name} ({m.get('reason')}): fit {m.get('fit_index')}, "
                f"epoch {m.get('epoch', 0) + 1}, batch {m.get('batch')}, "
                f"global step {m.get('global_step')}"
                + (" (fit finished)" if m.get("fit_done") else "")
            )

    def slot(self, model) -> int:
        if id(model) not in self.slots:
            self.slots[id(model)] = len(self.slots)
            self._models.append(model)
        return self.slots[id(model)]

    def report(self, **fields) -> None:
        if self.note is not None:
            fields.setdefault("note", self.note)
        self.writer.write(record(generation=self.generation, replicas=self.replicas, **fields))

    def exit_stopped(self, why: str) -> None:
        since = self.stop.requested_at
        ago = f", {time.time() - since:.3f} s after the request" if since else ""
        log(f"stopping for the sidecar ({why}{ago}); exit {P.TRAINER_STOPPED}")
        self.wait_background()
        exit_now(P.TRAINER_STOPPED)  # progress lines are flushed as written: nothing to close

    def on_stop_signal(self) -> None:
        """In the signal thread: stop now if the training state allows it (see callback.py)."""
        if self.stop.busy == 0:
            self.exit_stopped("no training step in flight")
        session = self.session
        with self.safe_lock:
            if session is None or self.safe is None:
                return  # the training loop stops at its next step boundary
            if self.safe == "save":
                session.checkpoint("stop requested")
            else:
                self.wait_background()  # a periodic checkpoint must be committed first
            if session.cb is not None:
                session.cb.report(stopped=True)
            self.exit_stopped(f"fit {session.k}, at a safe point ({self.safe})")

    def wait_background(self) -> None:
        if self.bg is not None:
            self.bg.join()
            self.bg = None

    # -- fit --------------------------------------------------------------------------------------
    def fit(self, orig, model, *args, **kwargs):
        self.stop.busy += 1
        try:
            return self._fit(orig, model, *args, **kwargs)
        finally:
            self.stop.busy -= 1

    def _fit(self, orig, model, *args, **kwargs):
        bound = inspect.signature(orig).bind(model, *args, **kwargs)
        bound.apply_defaults()
        fargs = dict(bound.arguments)
        fargs.pop("self", None)
        k = self.fit_count
        self.fit_count += 1
        slot = self.slot(model)
        self.last_model = model
        backend().install(model)
        m = self.resume.meta if self.resume is not None else None
        if m is not None and (k < m["fit_index"] or (k == m["fit_index"] and m.get("fit_done"))):
            return self._skip_finished(model, k, slot, fargs)
        if self.stop.requested:
            self.exit_stopped("before fit")
        if self.epochs_override:
            fargs["epochs"] = int(self.epochs_override)
        resume = m if m is not None and k == m["fit_index"] else None
        session = FitSession(self, model, k, slot, fargs, resume)
        return session.run(orig)

    def _skip_finished(self, model, k: int, slot: int, fargs: dict):
        info = self.completed.get(str(k)) or {}
        m = self.resume.meta
        source = None
        if k == m["fit_index"]:
            source = self.resume
        elif m.get("slot") == slot:
            # a later fit of this same model resumes from its own checkpoint, which restores
            # the model: this fit's checkpoint would be overwritten (and may be pruned by now)
            source = None
        else:
            st = self.slot_states.get(str(slot))
            if st and st.get("fit") == k:
                source = self.store.get(st["checkpoint"])
        if source is not None:
            modelstate.ensure_built(model, sample_batch(fargs))
            arrays = modelstate.load(source.file(STATE_FILE))
            for group in ("model", "optimizer"):
                modelstate.assign_group(model, group, arrays)
            log(f"fit {k} finished before the restart: restored its result from {source.name}")
        else:
            log(f"fit {k} finished before the restart: skipped (a later fit restores this model)")
        return make_history(model, info.get("history") or {}, fargs)

    def finalize(self) -> None:
        """Save the last model the script trained as ``model.keras`` (atomically)."""
        model = self.last_model
        if model is None:
            log("the script never called fit(): no model saved")
            return
        t0 = time.monotonic()
        try:
            with backend().saving():
                save_atomically(self.job / P.MODEL, model.save)
            log(f"final model saved to {self.job / P.MODEL} in {time.monotonic() - t0:.2f} s")
        except Exception as e:
            log(f"could not save the whole model ({type(e).__name__}: {e}); saving its weights")
            save_atomically(self.job / P.MODEL_WEIGHTS, model.save_weights)


def install(rt: Runtime) -> None:
    """Replace ``keras.Model.fit`` (every Keras model class inherits it)."""
    orig = keras.Model.fit
    if getattr(orig, "_elastic", False):
        return

    @functools.wraps(orig)
    def fit(self, *args, **kwargs):
        return rt.fit(orig, self, *args, **kwargs)

    fit._elastic = True
    keras.Model.fit = fit
