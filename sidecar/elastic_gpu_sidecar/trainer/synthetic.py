"""A training job without TensorFlow: speed from a profile, same protocol as the trainer.

``python -m elastic_gpu_sidecar.trainer.synthetic --profile 1:100,2:190,4:360 --work 5000`` processes
``work`` samples at the speed the profile gives for its GPU count (samples/s, interpolated
between points), writes the same progress records, atomic checkpoints (of the work done) and
obeys the same stop-at-next-step signal as the TensorFlow trainer, so the same sidecar drives
it. It imports neither numpy nor TensorFlow: a 2-core machine can run dozens of live jobs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

from .. import protocol as P
from ..jobdir import JobDir
from ..procs import die_with_parent
from .checkpoint import CheckpointStore
from .progress import LiveCounter, ProgressWriter, progress_interval, record
from .stopsignal import StopRequest, exit_now


def parse_profile(text: str) -> list[tuple[int, float]]:
    """``"1:100,2:190"`` -> ``[(1, 100.0), (2, 190.0)]`` (GPU count: samples/s)."""
    points = []
    for part in text.split(","):
        gpus, _, speed = part.partition(":")
        try:
            points.append((int(gpus), float(speed)))
        except ValueError:
            raise ValueError(f"bad profile point {part!r}; expected GPUS:SAMPLES_PER_S") from None
    points.sort()
    if not points or any(g <= 0 or s <= 0 for g, s in points):
        raise ValueError("a profile needs positive GPU counts and speeds")
    return points


def speed_at(profile: list[tuple[int, float]], gpus: int) -> float:
    """Linear between measured points; proportional below the first; flat after the last
    (no gain is assumed beyond what was measured)."""
    if gpus <= 0:
        return 0.0
    g0, s0 = profile[0]
    if gpus <= g0:
        return s0 * gpus / g0
    for (ga, sa), (gb, sb) in itertools.pairwise(profile):
        if gpus <= gb:
            return sa + (sb - sa) * (gpus - ga) / (gb - ga)
    return profile[-1][1]


class SyntheticJob:
    def __init__(self, args: argparse.Namespace):
        self.job = JobDir(args.job_dir)
        self.generation = args.generation
        self.gpus = args.gpus
        self.work = args.work
        self.batch = args.batch
        self.speed = speed_at(parse_profile(args.profile), self.gpus) * args.time_scale
        self.checkpoint_interval = args.checkpoint_interval
        self.save_s = max(args.save_seconds, 0.0)
        self.store = CheckpointStore(self.job / P.CHECKPOINTS, log=self._log)
        self.stop = StopRequest()
        self.done = 0
        self.steps = 0
        self.last_saved_step = -1

    def _log(self, message: str) -> None:
        print(f"[synthetic] {message}", flush=True)

    def save(self, reason: str) -> None:
        if self.steps == self.last_saved_step:
            return
        state = {"samples": self.done, "global_step": self.steps}
        t0 = time.monotonic()
        time.sleep(self.save_s)  # the time a real model's save takes, which stops wait for
        self.store.write(
            {"state.json": json.dumps(state).encode()},
            dict(state, reason=reason, generation=self.generation, replicas=self.gpus),
        )
        self.last_saved_step = self.steps
        self._log(f"checkpoint ({reason}) at step {self.steps} in {time.monotonic() - t0:.3f} s")

    def restore(self) -> None:
        self.store.clean_partial()
        ckpt = self.store.latest()
        if ckpt is not None:
            state = json.loads(ckpt.file("state.json").read_text())
            self.done, self.steps = int(state["samples"]), int(state["global_step"])
            self.last_saved_step = self.steps
            self._log(f"restored {ckpt.name}: {self.done}/{self.work} samples, step {self.steps}")

    def run(self) -> int:
        self.stop.install()
        self.restore()
        steps_total = math.ceil(self.work / self.batch)
        writer = ProgressWriter(self.job.path)
        live = LiveCounter(self.job.path)
        interval = progress_interval()
        step_time = self.batch / self.speed
        self._log(f"{self.gpus} GPU(s): {self.speed:.1f} samples/s, step {step_time * 1e3:.2f} ms")
        resumed_from = self.steps
        t0 = time.monotonic()
        gen_steps = 0
        last_report = None
        last_done = self.done

        def report(**extra) -> None:
            nonlocal last_report, last_done
            now = time.monotonic()
            rate = None
            if last_report is not None and now > last_report:
                rate = (self.done - last_done) / (now - last_report)
            last_report, last_done = now, self.done
            writer.write(
                record(
                    generation=self.generation,
                    replicas=self.gpus,
                    epoch=0,
                    epochs=1,
                    step_in_epoch=self.steps,
                    steps_per_epoch=steps_total,
                    global_step=self.steps,
                    samples=self.done,
                    loss=round(1.0 / (1.0 + self.done / self.batch), 6),
                    metrics={},
                    samples_per_s=rate,
                    batch_size=self.batch,
                    **extra,
                )
            )

        next_ckpt = time.monotonic() + self.checkpoint_interval
        while self.done < self.work:
            due = int((time.monotonic() - t0) / step_time)  # steps finished by now
            new = min(due - gen_steps, steps_total - self.steps)
            if new > 0:
                for _ in range(new):
                    self.done += min(self.batch, self.work - self.done)
                self.steps += new
                gen_steps += new
                live.update(self.generation, self.steps)
                if last_report is None:
                    report(first=True, resumed_from=resumed_from, pid=os.getpid())
                elif time.monotonic() - last_report >= interval:
                    report()
            if self.stop.requested:
                report(stopped=True)
                self.save("stop requested")
                writer.close()
                exit_now(P.TRAINER_STOPPED)
            if self.done >= self.work:
                break
            if time.monotonic() >= next_ckpt:
                self.save("periodic")
                next_ckpt = time.monotonic() + self.checkpoint_interval
            wake = t0 + (gen_steps + 1) * step_time
            time.sleep(min(max(wake - time.monotonic(), 0.002), 0.1))
        report()
        self.save("finished")
        writer.close()
        return P.TRAINER_DONE


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m elastic_gpu_sidecar.trainer.synthetic")
    parser.add_argument("--profile", required=True, help="GPUS:SAMPLES_PER_S,... e.g. 1:100,2:190")
    parser.add_argument("--work", type=int, required=True, help="samples to process in total")
    parser.add_argument("--time-scale", type=float, default=1.0, help="run F times faster")
    parser.add_argument("--batch", type=int, default=32, help="samples per step")
    parser.add_argument("--job-dir", default=env.get(P.ENV_JOB_DIR))
    parser.add_argument("--gpus", type=int, default=len(P.parse_gpus(env.get(P.ENV_GPUS, "0"))))
    parser.add_argument("--generation", type=int, default=int(env.get(P.ENV_GENERATION, "1")))
    parser.add_argument(
        "--checkpoint-interval", type=float, default=P.DEFAULT_CHECKPOINT_INTERVAL_S
    )
    parser.add_argument(
        "--save-seconds", type=float, default=0.0, help="seconds each checkpoint takes to write"
    )
    args = parser.parse_args(argv)
    if not args.job_dir:
        parser.error("--job-dir is required outside a sidecar")
    if args.work <= 0 or args.batch <= 0 or args.time_scale <= 0:
        parser.error("--work, --batch and --time-scale must be positive")
    sidecar = env.get(P.ENV_SIDECAR_PID)
    die_with_parent(int(sidecar) if sidecar else None)
    Path(args.job_dir).mkdir(parents=True, exist_ok=True)
    return SyntheticJob(args).run()


if __name__ == "__main__":
    sys.exit(main())
