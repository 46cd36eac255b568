"""The crash suite's harness: synthetic jobs on real servers, SIGKILLs at seeded points.

A ``Crashes`` run submits a few synthetic jobs (no TensorFlow: a 2-core machine runs them
side by side) and then, for each of its seeded kills, picks a target (the Jupyter server,
the shared scheduler, a sidecar, a trainer), a job and a point of that job's life (queued,
started, running, some fraction of its work done), waits for the job to reach that point
(read from its job dir, so the scheduler may be down) and sends SIGKILL; a killed server or
scheduler is restarted on the same port and database, a killed sidecar is left to the
scheduler (it relaunches it), a killed trainer to its sidecar (it restarts it). Then every
job must end, done or failed with a reason, and every progress record a heartbeat got a 200
for (seen by a recording proxy between the sidecars and the scheduler) must be in the
database. The seed decides everything but the timing the machine adds.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
from dataclasses import dataclass, field
from pathlib import Path

from faultkit import Audit, rows
from servers import HeartbeatRecorder, get_json, wait_for

#: Where a job may be when its target is killed: (name, fraction of its work done, or None
#: for a state read from its status file).
POINTS = (
    ("queued", None),
    ("started", None),
    ("running", 0.0),
    ("a quarter done", 0.25),
    ("half done", 0.5),
    ("nearly done", 0.85),
)
WORK = 1000  # samples: 10 s at 100/s on one GPU, under 6 s on two
JOB = {
    "kind": "synthetic",
    "min_gpus": 1,
    "max_gpus": 2,
    "synthetic": {"work": WORK, "throughput": {"1": 100, "2": 190}, "batch": 10},
}
ENV = {"ELASTIC_GPU_PROGRESS_INTERVAL": "0.25"}
#: The longest a job may take to end once the kills are over (far above what it needs).
END_S = 150


@dataclass
class Crashes:
    seed: int
    #: The processes a kill may target, by name (restarted on the same port and database);
    #: "sidecar" and "trainer" are added to them.
    processes: dict[str, object]
    api: tuple[str, str]  # where jobs are submitted and read: (API root, token)
    recorder: HeartbeatRecorder
    db: Path
    audit: Audit
    kills: int = 4
    jobs: list[dict] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.targets = (*self.processes, "sidecar", "trainer")

    # -- the run --------------------------------------------------------------------------
    def run(self, jobs: int = 3) -> None:
        for i in range(jobs):
            self.submit(f"crash-{self.seed}-{i}")
        first = self.rng.sample(list(self.processes), len(self.processes))
        for i in range(self.kills):  # each process is killed once at least, the rest at random
            target = first[i] if i < len(first) else self.rng.choice(self.targets)
            job = self.rng.choice(self.jobs)
            point = self.rng.choice(POINTS)
            self.kill_at(target, job, point)
            if self.rng.random() < 0.3:  # now and then a job arrives in the middle of it all
                self.submit(f"crash-{self.seed}-late-{len(self.jobs)}")
        self.check()

    def submit(self, name: str) -> None:
        api_url, token = self.api
        code, job = self.audit.call("POST", api_url + "jobs", token, dict(JOB, name=name))
        assert code == 201, job
        self.jobs.append(job)

    def kill_at(self, target: str, job: dict, point: tuple[str, float | None]) -> None:
        name, fraction = point

        def reached():
            status = read_json(Path(job["job_dir"]) / "status.json")
            if self.final(job):
                return "ended"
            if name == "queued":
                return "now"
            if name == "started":
                return "now" if status else None
            done = max((r.get("samples") or 0 for r in progress(job)), default=None)
            return "now" if done is not None and done >= fraction * WORK else None

        when = wait_for(reached, 120, interval=0.1, what=f"{job['id']} to be {name}")
        if when == "ended" and target in ("sidecar", "trainer"):
            self.log.append(f"{target} of {job['id']}: ended before {name}")
            return
        self.log.append(f"kill -9 {target} ({job['id']} {name})")
        self.audit.kills.append(f"{target} at {name}")
        if target in self.processes:
            process = self.processes[target]
            os.kill(process.proc.pid, signal.SIGKILL)  # no shutdown hook, no goodbye
            process.proc.wait()
            process.start()
        else:
            status = read_json(Path(job["job_dir"]) / "status.json") or {}
            pid = status.get("sidecar_pid" if target == "sidecar" else "trainer_pid")
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def final(self, job: dict) -> dict | None:
        api_url, token = self.api
        try:
            now = get_json(api_url + f"jobs/{job['id']}", token, timeout=5)
        except OSError:  # the scheduler is being restarted
            return None
        return now if now["state"] in ("done", "failed", "cancelled") else None

    # -- the checks -------------------------------------------------------------------------
    def check(self) -> None:
        ended: dict[str, dict] = {}

        def all_ended():
            for job in self.jobs:
                if job["id"] not in ended and (done := self.final(job)):
                    ended[job["id"]] = done
            return len(ended) == len(self.jobs)

        with contextlib.suppress(TimeoutError):  # what is still open then is stuck
            wait_for(all_ended, END_S, interval=0.5, what="every job to end")
        self.audit.jobs = len(self.jobs)
        self.audit.stuck = len(self.jobs) - len(ended)
        stored = {}
        for job_id, t in rows(self.db, "SELECT job_id, t FROM progress"):
            stored.setdefault(job_id, set()).add(t)
        acked = self.recorder.acknowledged()
        self.audit.acknowledged = sum(len(v) for v in acked.values())
        missing = {
            job_id: sorted({r["t"] for r in records} - stored.get(job_id, set()))
            for job_id, records in acked.items()
        }
        self.audit.lost = sum(len(v) for v in missing.values())
        with self.recorder.lock:
            for _, status, answer in self.recorder.seen:
                if status != 502:  # the proxy's own answer while the scheduler was down
                    self.audit.answer(status, answer, "heartbeat")
        story = "; ".join(self.log)
        stuck = sorted({j["id"] for j in self.jobs} - set(ended))
        assert not stuck, f"stuck: {stuck} after {story}"
        for job in ended.values():
            assert job["state"] in ("done", "failed"), (job["state"], story)
            if job["state"] == "failed":
                assert job["reason"].startswith("failed: ") and job["error"], (job, story)
        assert not self.audit.lost, f"acknowledged records lost: {missing} after {story}"
        assert not self.audit.unexplained, self.audit.unexplained


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def progress(job: dict) -> list[dict]:
    try:
        text = (Path(job["job_dir"]) / "progress.jsonl").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return out
