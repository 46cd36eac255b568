"""The script's steps, counted from outside: the global step, samples, loss, progress records.

A step is one ``step()`` of the script's optimizer (a global post-hook on every
``torch.optim.Optimizer``). Where a script steps several optimizers each iteration (a GAN),
the first one to step is counted; another takes its place when it steps twice while the
counted one does not (the script replaced its optimizer). The count starts at the step of the
script's last save (``savepoint``), where the script resumes. Rank 0 writes the progress
records and the live counter, as every trainer does (``progress.py``).
"""

from __future__ import annotations

import contextlib
import time
import weakref

from ...jobdir import JobDir
from .. import ranks
from ..progress import LiveCounter, ProgressWriter, progress_interval, record
from . import savepoint
from .loaders import Feed
from .savepoint import Savepoint


class Meter:
    def __init__(
        self,
        job: JobDir,
        generation: int,
        world: int,
        start: Savepoint | None,
        feed: Feed,
        ready_at: float,
    ) -> None:
        self.job = job
        self.generation = generation
        self.world = world
        self.feed = feed
        self.ready_at = ready_at
        self.leader = ranks.is_leader_rank()
        self.resumed_from = start.step if start else 0
        self.global_step = self.resumed_from
        self.samples: int | None = start.samples if start else 0
        #: The save the script resumes from if it stops now (None: it saved nothing yet).
        self.last_save = start
        self.steps_here = 0  # steps trained by this process
        self.loss = None  # the last scalar the script called backward() on (a tensor)
        self.note: str | None = None  # what the records say the adapter could not honour
        self._primary: weakref.ref | None = None
        self._candidate: weakref.ref | None = None
        self._interval = progress_interval()
        self._last_t: float | None = None
        self._last_samples = 0
        self.on_first_step = None  # called on rank 0 after the first step, before its record
        if self.leader:
            self.writer = ProgressWriter(job.path)
            self.live = LiveCounter(job.path)

    # -- steps --------------------------------------------------------------------------------
    def counts(self, optimizer) -> bool:
        """Whether this ``step()`` of ``optimizer`` is a step of the training (see above)."""
        primary = self._primary() if self._primary is not None else None
        if primary is None or optimizer is primary:
            self._primary, self._candidate = weakref.ref(optimizer), None
            return True
        if self._candidate is not None and self._candidate() is optimizer:
            self._primary, self._candidate = self._candidate, None
            return True
        self._candidate = weakref.ref(optimizer)
        return False

    def global_batch(self) -> int | None:
        per_rank = self.feed.batch_size()
        return None if per_rank is None else per_rank * self.world

    def stepped(self) -> None:
        self.steps_here += 1
        self.global_step += 1
        batch = self.global_batch()
        self.samples = None if batch is None or self.samples is None else self.samples + batch
        if not self.leader:
            return
        self.live.update(self.generation, self.global_step)
        if self.steps_here == 1:
            if self.on_first_step is not None:
                self.on_first_step()
            self.report(
                first=True,
                pid=ranks.trainer_pid(),
                resumed_from=self.resumed_from,
                replayed=0,
                ready_at=self.ready_at,
            )
        elif time.monotonic() - self._last_t >= self._interval:
            self.report()

    def saved(self) -> None:
        """The script's ``torch.save`` returned (rank 0): where its checkpoint stands."""
        point = Savepoint(
            step=self.global_step,
            samples=self.samples,
            epoch=self.feed.epoch(),
            generation=self.generation,
        )
        self.last_save = savepoint.write(self.job, point)

    @property
    def unsaved(self) -> int:
        """Steps trained since the script's last save: trained again after a restart."""
        return self.global_step - (self.last_save.step if self.last_save else 0)

    # -- records ------------------------------------------------------------------------------
    def report(self, **extra) -> None:
        if not self.leader:
            return
        now = time.monotonic()
        rate = None
        if self._last_t is not None and self.samples is not None and now > self._last_t:
            rate = (self.samples - self._last_samples) / (now - self._last_t)
        self._last_t, self._last_samples = now, self.samples or 0
        loss = None
        if self.loss is not None:
            with contextlib.suppress(Exception):
                loss = float(self.loss)
        if self.note:
            extra.setdefault("note", self.note)
        self.writer.write(
            record(
                generation=self.generation,
                replicas=self.world,
                epoch=self.feed.epoch(),
                epochs=None,  # the script's loop, not known from outside
                step_in_epoch=self.feed.step_in_epoch(),
                steps_per_epoch=self.feed.steps_per_epoch(),
                global_step=self.global_step,
                samples=self.samples,
                loss=loss,
                metrics={},
                samples_per_s=rate,
                batch_size=self.global_batch(),
                **extra,
            )
        )
