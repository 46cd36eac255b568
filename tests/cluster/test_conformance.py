"""One suite for every cluster backend: no GPU is ever held by two generations.

Random sequences of submits, cancels, sidecar failures (SIGKILL through the backend) and, on
Ray, node losses and returns run against a real scheduler on the single-server backend (4
simulated GPUs) and on the Ray backend (2 nodes x 2 logical GPUs); the policy resizes jobs as
they come and go. Afterwards every trainer's time on its GPUs is read from the sidecars' own
logs; a trainer killed with its sidecar has no end line there, so it ended at the first kill of
its own job, or loss of its own node, after it started: for a lost node, once the sidecars that
ran there were gone (they outlive their node for a moment, a trainer may even start in it).
Two different generations, of one job or two, never overlap on one GPU; every job ends.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import random
import re
import signal
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


def node_of(gpu: str) -> str:
    return gpu.rpartition(":")[0]


def occupancy(
    job_id: str, job_dir: Path, killed: list[tuple[float, str]]
) -> list[tuple[float, float, int, list[str]]]:
    """(start, end, generation, gpus) of every trainer of a job, from its sidecar's log; a
    trainer without an end line ended at the first kill of its job or its node after it
    started (``killed``: when, and which job or node)."""
    spans: dict[str, list] = {}
    log = job_dir / "sidecar.log"
    for line in log.read_text().splitlines() if log.exists() else ():
        if m := STARTED.match(line):
            spans[m[2]] = [stamp(m[1]), None, int(m[4]), m[3].split(",")]
        elif (m := ENDED.match(line)) and m[2] in spans:
            spans[m[2]][1] = stamp(m[1])
    out = []
    for start, end, generation, gpus in spans.values():
        if end is None:
            mine = {job_id, *map(node_of, gpus)}
            end = min((t for t, who in killed if t >= start and who in mine), default=time.time())
        out.append((start, end, generation, gpus))
    return out


@pytest.mark.parametrize("seed", [1, 2])
async def test_no_gpu_is_held_by_two_generations(jp_fetch, jp_serverapp, request, backend, seed):
    app = next(iter(jp_serverapp.extension_manager.extension_apps["jupyter_elastic_gpu"]))
    version = (await api(jp_fetch, "updates", params={"since": 0, "timeout": 0}))["version"]
    service = app._service
    cluster = request.getfixturevalue("ray_cluster") if backend == "ray" else None
    rng = random.Random(f"{backend}-{seed}")
    jobs: list[dict] = []
    killed: list[tuple[float, str]] = []  # (when, the job or node)
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
            if job.lost < 2 and await service.launcher.signal(job.launch, signal.SIGKILL):
                killed.append((time.time(), job.id))
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
                killed.append((time.time(), lost_node))
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

    spans, logs = [], {}
    for job in jobs:
        job_dir = Path((await api(jp_fetch, f"jobs/{job['id']}"))["job_dir"])
        spans += [(job["id"], *s) for s in occupancy(job["id"], job_dir, killed)]
        log = job_dir / "sidecar.log"
        logs[job["id"]] = log.read_text() if log.exists() else ""
    assert spans, "no trainer ran"
    for a, b in itertools.combinations(spans, 2):
        shared = set(a[4]) & set(b[4])
        if shared and (a[0], a[3]) != (b[0], b[3]):
            overlap = min(a[2], b[2]) - max(a[1], b[1])
            said = "".join(f"\n{j}:\n{logs[j]}" for j in dict.fromkeys((a[0], b[0])))
            assert overlap <= 0, (
                f"GPUs {shared} held by {a[:4]} and {b[:4]} at once; kills {killed}; {said}"
            )
