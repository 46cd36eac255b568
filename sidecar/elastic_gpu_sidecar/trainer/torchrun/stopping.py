"""A stop, as ``torchrun``'s agent asks it: SIGTERM to the script, then a kill after a grace.

A torchrun script handles SIGTERM itself, usually by saving at its next step and exiting.
The adapter sends it that signal, in every rank after the SAME optimizer step (the ranks
agree on the stop with a collective after each step, ``torchdist.agree``), so that no rank
leaves while another waits for it in the next step's all-reduce. When no step comes (the
script is evaluating) the signal goes after the grace anyway. A script that has not ended a
grace (``ranks.stop_grace``) after the signal is ended, never in the middle of its own
``torch.save``. A process that trained no step yet has nothing to save and ends at once.

However the script ends once it was signalled (it returned, called ``sys.exit``, or failed
in a collective a stopped peer left), the rank exits 75: stopped. A script that finished on
its own before the signal came is done.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time

from ... import protocol as P
from .. import ranks, torchdist
from ..stopsignal import StopRequest, exit_now
from ..tlog import log
from .meter import Meter


class Stopper:
    def __init__(self, stop: StopRequest, meter: Meter, grace: float, elastic: bool) -> None:
        self.stop = stop
        self.meter = meter
        self.grace = grace
        self.elastic = elastic  # False: the script saves no checkpoint of its own
        self.signalled = False
        self.finished = False  # the script ended by itself (done), not stopped
        self.saving = 0  # >0 inside the script's torch.save: not the moment to end it
        self._end_after_save: str | None = None
        self._ended = False
        self._lock = threading.Lock()
        self.leader = ranks.is_leader_rank()

    def install(self) -> None:
        atexit.register(self._at_exit)

    # -- the request --------------------------------------------------------------------------
    def on_stop_signal(self) -> None:
        """In the stop-signal thread: the sidecar asked the job to stop."""
        if self.finished:
            return
        if self.meter.steps_here == 0:
            self.end("stop requested before this process trained a step: nothing to save")
            return
        timer = threading.Timer(
            self.grace, self.send_term, args=(f"when no step came in {self.grace:g} s",)
        )
        timer.daemon = True
        timer.start()

    def after_step(self) -> None:
        """In the script's thread, after each counted step: the ranks agree on a stop."""
        if torchdist.agree(self.stop.requested) and not self.signalled:
            self.send_term(f"after step {self.meter.global_step}")

    # -- SIGTERM, then the grace --------------------------------------------------------------
    def send_term(self, when: str) -> None:
        with self._lock:
            if self.signalled or self.finished:
                return
            self.signalled = True
        handler = signal.getsignal(signal.SIGTERM)
        if not callable(handler):
            self.end(f"the script has no SIGTERM handler: ended {when}")
            return
        if self.leader:
            log(
                f"stop: SIGTERM to the script {when}, as torchrun's agent sends it; "
                f"it has {self.grace:g} s to save and exit"
            )
        timer = threading.Timer(self.grace, self._overdue)
        timer.daemon = True
        timer.start()
        if threading.current_thread() is threading.main_thread():
            signal.raise_signal(signal.SIGTERM)  # its handler runs now, at this step
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    def _overdue(self) -> None:
        self.end(f"the script did not exit within {self.grace:g} s of SIGTERM")

    # -- the end ------------------------------------------------------------------------------
    def end(self, why: str) -> None:
        """Exit 75 now (after the script's torch.save in progress, if any)."""
        with self._lock:
            if self.saving:
                self._end_after_save = why
                return
            ending, self._ended = self._ended, True
        if ending:  # another thread is ending the process: with exit 75, not this one's
            threading.Event().wait()
        self._report(why)
        exit_now(P.TRAINER_STOPPED)

    def begin_save(self) -> None:
        with self._lock:
            self.saving += 1

    def save_done(self) -> None:
        with self._lock:
            self.saving -= 1
            why = self._end_after_save if self.saving == 0 else None
        if why is not None:
            self.end(why)

    def finalize(self) -> None:
        """The script returned (or called sys.exit(0)): a stop when it was signalled (exit
        75 here), else the script is done."""
        with self._lock:
            self.finished = not self.signalled
        if self.signalled:
            self.end("the script exited after SIGTERM")

    def _at_exit(self) -> None:
        # the script raised (or exited non-zero) while stopping: a peer that stopped left the
        # collective it was in, or the script's own exit path failed; it is stopped all the same
        if not self.finished and (self.signalled or self.stop.requested):
            self.end("the script ended with an error while stopping")

    def _report(self, why: str) -> None:
        m = self.meter
        if not m.leader:
            return
        since = self.stop.requested_at
        ago = f", {time.time() - since:.2f} s after the request" if since else ""
        if m.last_save is None and not self.elastic:
            lost = (
                f"the script saves no checkpoint of its own: its {m.global_step} steps since "
                "the start are lost"
            )
        elif m.last_save is None:
            lost = f"the script saved no checkpoint yet: its {m.unsaved} steps are lost"
        elif m.unsaved == 0:
            lost = "the script's last checkpoint is at this step: nothing is lost"
        else:
            lost = (
                f"the script's last checkpoint is at step {m.last_save.step}: the "
                f"{m.unsaved} steps since are lost (trained again)"
            )
        log(f"stopped at step {m.global_step} ({why}{ago}); {lost}; exit {P.TRAINER_STOPPED}")
        m.report(stopped=True)
