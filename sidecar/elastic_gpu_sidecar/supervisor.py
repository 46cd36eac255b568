"""The sidecar: supervise one trainer and reconcile it toward the desired grant.

The loop is level-triggered: it reads ``grant.json`` (written by the CLI or the scheduler
client) every 0.2 s or when nudged by a signal, compares it with the grant the trainer runs
on, and acts: ask the trainer to checkpoint and stop (SIGUSR1), wait, restart it on the new
GPUs. Crashes are retried with exponential backoff; a user's bug is not. Everything the
sidecar knows is in ``status.json``; everything it does is in ``sidecar.log``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time

from . import protocol as P
from .heartbeat import HeartbeatClient
from .jobdir import JobDir, ProgressTail, atomic_write_json, read_live
from .measurements import Measurements
from .options import Options
from .procs import GROUP_GONE_S, describe_exit, end_group, kill_group, reap_group
from .report import result_document, trainer_error
from .spawner import TrainerSpawner
from .wakeup import Wakeup

S = P.SidecarState
FINAL_EXIT = {
    S.DONE: P.EXIT_DONE,
    S.FAILED: P.EXIT_FAILED,
    S.SUSPENDED: P.EXIT_SUSPENDED,
    S.CANCELLED: P.EXIT_CANCELLED,
}


class _Stop:
    """A stop the sidecar asked for and is waiting on."""

    def __init__(self, kind: str, target: P.Grant, timeout: float, entry: dict | None):
        self.kind = kind  # "resize" | "suspend" | "cancel"
        self.target = target
        self.started = time.monotonic()
        self.deadline = self.started + timeout
        self.entry = entry
        self.killed = False


class Sidecar:
    def __init__(self, opts: Options):
        self.opts = opts
        self.job = JobDir(opts.job_dir)
        self.proc: subprocess.Popen | None = None
        self.running: P.Grant | None = None  # grant the current/last trainer was started on
        self.stopping: _Stop | None = None
        self.restart_at: float | None = None
        self.reached: int | None = None  # step the last trainer reached when it ended
        self.restarts = 0
        self.measured = Measurements()
        self.error: dict | None = None
        self.exit_code: int | None = None
        self.state = S.STARTING
        self.last_progress: dict | None = None
        self.first_step_seen = False
        self.started_trainer_at: float | None = None  # wall time of the last trainer start
        self._lock = threading.RLock()
        self._bad_grant: str | None = None
        self._voided: int | None = None  # the HTTP code that voided the claim (heartbeat thread)
        self.wakeup = Wakeup()
        self.spawner = TrainerSpawner(
            self.job, opts.command, simulated=opts.simulated, python=opts.python, log=self.log
        )
        self.heartbeat: HeartbeatClient | None = None
        self.started_at = time.time()

    # -- logging and status -------------------------------------------------------------------
    def log(self, message: str) -> None:
        self.job.log(message, echo=self.opts.echo)

    def _status(self) -> dict:
        replicas = len(self.running.gpus) if self.running else 0
        model = next(
            (str(self.job / n) for n in P.MODELS if (self.job / n).exists()),
            None,
        )
        return {
            "state": self.state,
            "generation": self.running.generation if self.running else None,
            "gpus": list(self.running.gpus) if self.running else [],
            "replicas": replicas,
            "sidecar_pid": os.getpid(),
            "trainer_pid": self.proc.pid if self.proc else None,
            "restarts": self.restarts,
            "resizes": self.measured.resizes,
            "error": self.error,
            "exit_code": self.exit_code,
            "model_path": model if self.state == S.DONE else None,
            "updated_at": time.time(),
            "job_id": self.opts.job_id,
            "mechanism": self.opts.mechanism,
            "started_at": self.started_at,
        }

    def write_status(self) -> None:
        with self._lock:
            atomic_write_json(self.job / P.STATUS, self._status())

    def snapshot(self) -> dict:
        """The heartbeat body (everything but job_id, which the client adds)."""
        with self._lock:
            st = self._status()
            return {
                "generation": st["generation"],
                "gpus": st["gpus"],
                "state": st["state"],
                "progress": self.last_progress,
                "throughput": self.measured.speed(),
                "resize_cost_s": self.measured.resize_cost(),
                "sidecar_pid": st["sidecar_pid"],
                "trainer_pid": st["trainer_pid"],
                "restarts": st["restarts"],
                "error": st["error"],
                "exit_code": st["exit_code"],
            }

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
        self.write_status()

    # -- setup --------------------------------------------------------------------------------
    def _setup(self) -> None:
        self.job.create()
        self._pidfile = self.job.claim()
        prev = self.job.read_status() or {}
        try:
            old = self.job.read_grant()
        except ValueError:
            old = None
        gen = self.opts.generation
        if gen is None:
            known = [g for g in (prev.get("generation"), old and old.generation) if g is not None]
            gen = max(known) + 1 if known else 1
        gpus = self.opts.gpus or (old.gpus if old else None) or prev.get("gpus")
        if not gpus:
            raise SystemExit("no GPUs given: pass --gpus")
        grant = P.Grant(gen, list(gpus), P.GrantAction.RUN, time.time())
        self.job.write_grant(grant)
        self.desired = grant
        self.measured = Measurements(prev.get("resizes"))
        atomic_write_json(self.job / P.JOB, self.opts.command)
        self.wakeup.install()
        what = self.opts.command.get("kind")
        self.log(
            f"sidecar {os.getpid()} started for {self._describe_command()} "
            f"({what}, mechanism {self.opts.mechanism}) in {self.job.path}"
        )
        if self.opts.scheduler_url:
            self.heartbeat = HeartbeatClient(
                self.opts.scheduler_url,
                self.opts.job_id or self.job.path.name,
                os.environ.get(P.ENV_SECRET, ""),
                interval=self.opts.heartbeat,
                snapshot=self.snapshot,
                on_grant=self.on_scheduler_grant,
                log=self.log,
                progress=self.job / P.PROGRESS,
                on_voided=self._on_voided,
            )

    def _describe_command(self) -> str:
        c = self.opts.command
        if c.get("kind") == P.JobKind.SYNTHETIC:
            return f"synthetic profile {c['profile']} work {c['work']}"
        return " ".join([c.get("script", "?"), *c.get("args", [])])

    def _on_voided(self, code: int) -> None:
        self._voided = code
        self.wakeup.wake()

    def on_scheduler_grant(self, grant: P.Grant) -> None:
        """Apply the scheduler's desired grant when it is newer or changes the action."""
        try:
            current = self.job.read_grant()
        except ValueError:
            current = None
        if (
            current is None
            or grant.generation > current.generation
            or (grant.action != current.action)
        ):
            self.log(
                f"scheduler grant: generation {grant.generation} gpus {','.join(grant.gpus)} "
                f"action {grant.action}"
            )
            self.job.write_grant(grant)
            self.wakeup.wake()

    # -- main loop ----------------------------------------------------------------------------
    def run(self) -> int:
        self._setup()
        self.tail = ProgressTail(self.job / P.PROGRESS, from_end=True)
        try:
            if self.heartbeat:
                self.heartbeat.start()
            self._start_trainer(self.desired, "start")
            while self.exit_code is None:
                self.wakeup.wait(0.2)
                if self._voided is not None:
                    self._void(self._voided)
                    break
                self._handle_signals()
                self._read_progress()
                self._check_trainer()
                if self.exit_code is None:
                    self._reconcile()
                    self._maybe_restart()
                    self._maybe_standby()
        except BaseException as e:
            if self.exit_code is None:
                self.log(f"sidecar error: {type(e).__name__}: {e}; stopping the trainer")
                self.error = {
                    "type": type(e).__name__,
                    "message": str(e),
                    "traceback": None,
                    "hint": "this is a sidecar failure, not a problem in your script",
                }
                self._finish(S.FAILED)
            if not isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            self._cleanup()
        return self.exit_code

    def _handle_signals(self) -> None:
        n = self.wakeup.take_cancels()
        if n:
            if (self.stopping is not None and self.stopping.kind == "cancel") or n > 1:
                self.log("second cancel signal: killing the trainer now")
                if self.proc is not None:
                    self._end_trainer()
                self._finish(S.CANCELLED)
                return
            self.log("cancel requested by signal: checkpointing and stopping")
            grant = self.desired
            self.job.write_grant(P.Grant(grant.generation, grant.gpus, P.GrantAction.CANCEL))

    def _read_progress(self) -> None:
        for rec in self.tail.read():
            with self._lock:
                self.last_progress = rec
                self.measured.add_progress(rec)
            if rec.get("first") and self.proc is not None and rec.get("pid") == self.proc.pid:
                self._on_first_step(rec)

    def _on_first_step(self, rec: dict) -> None:
        self.first_step_seen = True
        line = self.measured.first_step(
            rec,
            self.reached,
            self.running.gpus,
            handed_at=self.started_trainer_at,
            standby=self._standby_on(),
        )
        self.log(line)
        self._set_state(S.RUNNING)

    # -- trainer lifecycle --------------------------------------------------------------------
    def _start_trainer(self, grant: P.Grant, reason: str) -> None:
        marker = (
            f"\n===== generation {grant.generation} on gpus {','.join(grant.gpus)} "
            f"({len(grant.gpus)} replicas, {'simulated' if self.opts.simulated else 'real'}) "
            f"[{reason}] {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n"
        )
        with open(self.job / P.TRAINER_LOG, "a", encoding="utf-8") as f:
            f.write(marker)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.job / P.TRAINER_ERROR)
        self.first_step_seen = False
        self.started_trainer_at = time.time()
        proc, from_standby = self.spawner.start(grant)
        self.proc = proc
        self.running = grant
        self.restart_at = None
        how = "standby interpreter" if from_standby else "new process"
        self.log(
            f"trainer {proc.pid} started ({how}) on gpus {','.join(grant.gpus)}, "
            f"generation {grant.generation} [{reason}]"
        )
        state = {"start": S.STARTING, "resize": S.RESIZING}.get(reason, S.RESTARTING)
        self._set_state(state)

    def _standby_on(self) -> bool:
        return self.opts.standby and self.opts.mechanism == P.Mechanism.SIDECAR

    def _maybe_standby(self) -> None:
        # after the first step (not to slow the start), never while the trainer is replaced
        if self._standby_on() and self.first_step_seen and self.stopping is None:
            self.spawner.ensure_standby()

    def _reconcile(self) -> None:
        try:
            desired = self.job.read_grant()
        except ValueError as e:
            if self._bad_grant != str(e):
                self.log(f"ignoring an invalid {P.GRANT}: {e}")
                self._bad_grant = str(e)
            return
        if desired is None:
            return
        self.desired = desired
        if desired.action != P.GrantAction.RUN:
            kind = "cancel" if desired.action == P.GrantAction.CANCEL else "suspend"
            if self.stopping is not None and (
                self.stopping.kind == kind or self.stopping.kind == "cancel"
            ):
                return
            if self.proc is None:
                self.log(f"{kind} requested while no trainer runs")
                self._finish(S.CANCELLED if kind == "cancel" else S.SUSPENDED)
                return
            self._request_stop(kind, desired)
            return
        running = self.running
        if (desired.generation, desired.gpus) == (running.generation, running.gpus):
            return
        if self.stopping is not None:
            if self.stopping.kind == "resize" and self.stopping.target != desired:
                self.log(f"newer grant generation {desired.generation} while resizing: retargeting")
                self.stopping.target = desired
                self.stopping.entry.update(generation=desired.generation, to_gpus=desired.gpus)
            return
        entry = self.measured.resize_requested(
            desired.generation,
            running.gpus,
            desired.gpus,
            desired.requested_at,
            self.opts.mechanism.value,
        )
        if self.proc is None:  # down, waiting to restart after a crash: restart on the new grant
            entry["stopped_at"] = time.time()
            self.measured.pending = entry
            self.running = desired
            self.log(f"grant generation {desired.generation} adopted while the trainer is down")
            return
        self._request_stop("resize", desired, entry)

    def _request_stop(self, kind: str, target: P.Grant, entry: dict | None = None) -> None:
        self.stopping = _Stop(kind, target, self.opts.stop_timeout, entry)
        if kind == "resize":
            self.log(
                f"resize requested: generation {target.generation}, gpus "
                f"{','.join(self.running.gpus)} -> {','.join(target.gpus)} "
                f"(mechanism {self.opts.mechanism})"
            )
            self._set_state(S.RESIZING)
            if self.opts.mechanism == P.Mechanism.TERMINATION:
                self.stopping.killed = True
                kill_group(self.proc)
                return
        else:
            self.log(f"{kind} requested: asking the trainer to checkpoint and stop")
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGUSR1)

    def _check_trainer(self) -> None:
        if self.proc is None:
            return
        rc = self.proc.poll()
        if rc is None:
            stop = self.stopping
            if stop is not None and not stop.killed and time.monotonic() > stop.deadline:
                self.log(
                    f"trainer did not checkpoint within {self.opts.stop_timeout:g} s: "
                    "killing it; it will resume from its last periodic checkpoint"
                )
                stop.killed = True
                kill_group(self.proc)
            return
        proc, self.proc = self.proc, None
        if left := reap_group(proc):
            self._say_left(left)
        live = read_live(self.job / P.LIVE)
        self.reached = live[1] if live and live[0] == self.running.generation else None
        stop, self.stopping = self.stopping, None
        how = describe_exit(rc)
        at = f" at step {self.reached}" if self.reached is not None else ""
        self.log(f"trainer {proc.pid} ended: {how}{at}")
        if rc == P.TRAINER_DONE:
            self._finish(S.DONE)
        elif rc == P.TRAINER_USER_ERROR:
            self.error = trainer_error(self.job, rc)
            self._finish(S.FAILED)
        elif stop is not None and (rc == P.TRAINER_STOPPED or stop.killed or rc == -signal.SIGUSR1):
            took = time.monotonic() - stop.started
            if rc == P.TRAINER_STOPPED:
                self.log(f"checkpoint written and trainer stopped {took:.2f} s after the request")
            if stop.kind == "resize":
                stop.entry["stopped_at"] = time.time()
                self.measured.pending = stop.entry
                if stop.killed:
                    self.log("trainer killed: resuming from the last periodic checkpoint")
                self._start_trainer(stop.target, "resize")
            else:
                self._finish(S.CANCELLED if stop.kind == "cancel" else S.SUSPENDED)
        elif rc == P.TRAINER_STOPPED:
            self.log("trainer stopped without a request from this sidecar: restarting it")
            self._start_trainer(self.running, "restart")
        else:
            self._crashed(rc, how)

    def _crashed(self, rc: int, how: str) -> None:
        err = trainer_error(self.job, rc)
        self.restarts += 1
        if self.restarts > self.opts.max_restarts:
            self.error = err
            self.log(f"trainer failed {self.restarts} times; giving up")
            self._finish(S.FAILED)
            return
        delay = self.opts.backoff * 2 ** (self.restarts - 1)
        self.log(
            f"trainer crashed ({how}); restart {self.restarts}/{self.opts.max_restarts} from the "
            f"last checkpoint in {delay:g} s"
        )
        self.restart_at = time.monotonic() + delay
        self._set_state(S.RESTARTING)

    def _maybe_restart(self) -> None:
        if (
            self.proc is None
            and self.restart_at is not None
            and time.monotonic() >= self.restart_at
        ):
            self._start_trainer(self.running, "restart")

    def _void(self, code: int) -> None:
        """The claim is void: the trainer is killed at once (a checkpoint now could overwrite
        the one a new sidecar of the job resumed from) and neither status nor result is
        written (the job dir may be the new sidecar's)."""
        self.log(
            f"the scheduler refuses this job's credentials, which it had accepted (HTTP {code}): "
            "its claim on the GPUs is void (the job was started again after this sidecar was "
            "given up on, or it missed a release deadline); killing the trainer"
        )
        if self.proc is not None:
            self._end_trainer()
            self.proc = None
        self.exit_code = P.EXIT_VOIDED

    def _finish(self, state: P.SidecarState) -> None:
        self.exit_code = FINAL_EXIT[state]
        self.restart_at = None
        self.state = state
        if state == S.FAILED and self.error:
            self.log(f"job failed: {self.error['type']}: {self.error['message']}")
        else:
            self.log(f"job {state}")
        self.write_status()
        if state != S.SUSPENDED:
            result = result_document(
                state,
                self.exit_code,
                self._status()["model_path"],
                self.last_progress,
                self.restarts,
                len(self.measured.resizes),
                self.error,
                self.started_at,
            )
            atomic_write_json(self.job / P.RESULT, result)

    def _end_trainer(self) -> None:
        """Kill the trainer's group now and wait for all of it to be gone."""
        if left := end_group(self.proc):
            self._say_left(left)

    def _say_left(self, left: list[int]) -> None:
        self.log(
            f"processes {', '.join(map(str, left))} of the trainer's group were killed but are "
            f"still there after {GROUP_GONE_S:g} s (uninterruptible: a driver call?)"
        )

    def _cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._end_trainer()
        self.proc = None
        with contextlib.suppress(AttributeError):
            self.spawner.stop_standby()
        self.wakeup.uninstall()
        if self.heartbeat is not None:
            self.heartbeat.stop()
            if not self.heartbeat.voided:
                self.heartbeat.final_beat(self.opts.final_linger)  # the end, once answered
        with contextlib.suppress(OSError, AttributeError):
            os.unlink(self.job / P.PIDFILE)
            self._pidfile.close()
