"""One suite for every cluster backend: no GPU is ever held by two generations.

Random sequences of submits, cancels, sidecar failures (SIGKILL through the backend) and, on
Ray, node losses and returns run against a real scheduler on the single-server backend (4
simulated GPUs) and on the Ray backend (2 nodes x 2 logical GPUs); the policy resizes jobs as
they come and go. Afterwards every trainer's time on its GPUs is read from the sidecars' own
logs. A trainer killed with its sidecar (by the test, by a lost node, or by the launcher giving
up on a slow start) has no end line there: it ended when it was last seen alive by a watcher
that lists the machine's trainer processes all along (every backend runs them on this machine).
That end is a lower bound, so an overlap found is a real one. Two different generations, of one
job or two, never overlap on one GPU; every job ends.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from apikit import api, until
from servers import is_running

pytestmark = pytest.mark.slow

STARTED = re.compile(r"^(\S+ \S+) trainer (\d+) started \(.*\) on gpus (\S+), generation (\d+)")
ENDED = re.compile(r"^(\S+ \S+) trainer (\d+) ended")


@pytest.fixture(params=["local", "ray"])
def backend(request):
    return request.param


def stamp(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


class TrainerWatch:
    """When each trainer process was last seen alive (wall-clock time, by pid): a thread lists
    ``/proc`` every ``interval`` seconds, on its own so that a test blocked in a call (Ray's
    node removal) does not blind it. A zombie is not alive: it holds no memory, a GPU's
    neither. A process's command line is read while it is new (one forked but not yet run as
    a trainer still has its parent's), then only a trainer's state: a scan costs little more
    than listing ``/proc``."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.last_alive: dict[int, float] = {}
        self._others: dict[int, float] = {}  # pids that are not trainers: when first seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            pids = {int(n) for n in os.listdir("/proc") if n.isdigit()}
            settled = {p for p, seen in self._others.items() if now - seen > 1.0}
            for pid in pids - settled:
                if self._alive_trainer(pid, now):
                    self.last_alive[pid] = now
            for pid in set(self._others) - pids:  # a pid gone can come back as a trainer
                del self._others[pid]
            self._stop.wait(self.interval)

    def _alive_trainer(self, pid: int, now: float) -> bool:
        try:
            if pid not in self.last_alive:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if b"elastic_gpu_sidecar.trainer.synthetic" not in argv:
                    self._others.setdefault(pid, now)
                    return False
                self._others.pop(pid, None)
        except OSError:
            return False
        return is_running(pid)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def trainers():
    watch = TrainerWatch()
    yield watch
    watch.stop()


def occupancy(
    job_dir: Path, last_alive: dict[int, float]
) -> list[tuple[float, float, int, list[str]]]:
    """(start, end, generation, gpus) of every trainer of a job, from its sidecar's log; a
    trainer without an end line ended when it was last seen alive (``last_alive``, by pid),
    or at its start if it never was (it lived less than the watcher's interval)."""
    spans: dict[str, list] = {}
    log = job_dir / "sidecar.log"
    for line in log.read_text().splitlines() if log.exists() else ():
        if m := STARTED.match(line):
            spans[m[2]] = [stamp(m[1]), None, int(m[4]), m[3].split(",")]
        elif (m := ENDED.match(line)) and m[2] in spans:
            spans[m[2]][1] = stamp(m[1])
    out = []
    for pid, (start, end, generation, gpus) in spans.items():
        if end is None:
            end = max(start, last_alive.get(int(pid), start))
        out.append((start, end, generation, gpus))
    return out


@pytest.mark.parametrize("seed", [1, 2])
async def test_no_gpu_is_held_by_two_generations(
    jp_fetch, jp_serverapp, request, backend, seed, trainers
):
    app = next(iter(jp_serverapp.extension_manager.extension_apps["jupyter_elastic_gpu"]))
    version = (await api(jp_fetch, "updates", params={"since": 0, "timeout": 0}))["version"]
    service = app._service
    cluster = request.getfixturevalue("ray_cluster") if backend == "ray" else None
    rng = random.Random(f"{backend}-{seed}")
    jobs: list[dict] = []
    lost_node = None
    for step in range(12):
        op = rng.choice(["submit", "submit", "submit", "cancel", "fail", "node"])
        running = [j for j in service.jobs.values() if j.state.active and j.launch]
        if op == "submit" or not jobs:
            lo = rng.choice([1, 1, 2])
            body = {
                "name": f"s{step}",
                "kind": "synthetic",
                "min_gpus": lo,
                "max_gpus": rng.choice([lo, 2]),
                "synthetic": {
                    "work": rng.randrange(300, 1500),
                    "throughput": {"1": 100, "2": 190},
                    "batch": 10,
                    "save_s": rng.uniform(0.3, 1.5),  # a stop or resize takes a while
                },
            }
            jobs.append(await api(jp_fetch, "jobs", "POST", body))
        elif op == "cancel":
            await api(jp_fetch, f"jobs/{rng.choice(jobs)['id']}/cancel", "POST", {})
        elif op == "fail" and running:
            job = rng.choice(running)
            if job.lost < 2:
                await service.launcher.signal(job.launch, signal.SIGKILL)
        elif op == "node" and cluster is not None:
            if lost_node is None:
                lost_node = rng.choice(sorted(cluster.nodes))
                there = [
                    j.launch["remote_pid"]
                    for j in service.jobs.values()
                    if j.state.active and j.launch and j.launch.get("node") == lost_node
                ]
                cluster.remove(lost_node)

                async def gone(pids=there):
                    return not any(map(is_running, pids))

                await until(gone, 60, f"the sidecars of lost node {lost_node} gone")
            else:
                cluster.add(lost_node)
                lost_node = None
        for _ in range(rng.randint(1, 4)):  # let the scheduler act on it for a few changes
            query = {"since": version, "timeout": 5}
            version = (await api(jp_fetch, "updates", params=query))["version"]
    if cluster is not None and lost_node is not None:
        cluster.add(lost_node)

    deadline = time.monotonic() + 300
    while True:
        states = [(await api(jp_fetch, f"jobs/{j['id']}"))["state"] for j in jobs]
        if all(s in ("done", "cancelled", "failed") for s in states):
            break
        assert time.monotonic() < deadline, f"jobs still open after 300 s: {states}"
        await asyncio.sleep(0.5)
    assert "failed" not in states, states
    trainers.stop()

    spans, logs = [], {}
    for job in jobs:
        job_dir = Path((await api(jp_fetch, f"jobs/{job['id']}"))["job_dir"])
        spans += [(job["id"], *s) for s in occupancy(job_dir, trainers.last_alive)]
        log = job_dir / "sidecar.log"
        events = (await api(jp_fetch, f"jobs/{job['id']}/events"))["events"]
        logs[job["id"]] = (log.read_text() if log.exists() else "") + "".join(
            f"  event {e['t']:.3f} {e['kind']}: {e['message']}\n" for e in events
        )
    assert spans, "no trainer ran"
    for a, b in itertools.combinations(spans, 2):
        shared = set(a[4]) & set(b[4])
        if shared and (a[0], a[3]) != (b[0], b[3]):
            overlap = min(a[2], b[2]) - max(a[1], b[1])
            said = "".join(f"\n{j}:\n{logs[j]}" for j in dict.fromkeys((a[0], b[0])))
            assert overlap <= 0, f"GPUs {shared} held by {a[:4]} and {b[:4]} at once; {said}"
