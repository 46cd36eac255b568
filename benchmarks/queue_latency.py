"""How long `GET queue` takes with a long queue: the forecast's budget, measured through the API.

A real Jupyter server with the extension (a subprocess) on ``--gpus`` simulated GPUs gets
``--jobs`` synthetic jobs through the API (one to four GPUs each; ``max_open_jobs`` raised to
let them in), so that all but the running few wait, eligible. Its
launcher is real; the sidecar's Python is ``_launch_recorder.sh`` (it stays alive as a
``sleep`` and never heartbeats), so the running jobs stay where they are. Then ``--readers``
clients GET queue back to back (closed loop, one event loop, tornado's AsyncHTTPClient) in two
phases of ``--duration`` seconds each: ``steady`` (nothing changes: every answer after the first
reuses the forecast), and ``churn`` (one submission and one cancel a second, each a new state
that needs a new forecast, which the readers then share). It prints p50/p95/max per phase,
and what each answer said of its estimates (``estimate_limit`` of the entries: estimated,
'jobs' past ``forecast_jobs``, 'time' past ``forecast_budget``).

It then plays the same queue forward in this process, once within the service's budget and
once as the forecast did without one (the whole forward run), and prints each run's seconds,
decisions and limits: what the budget leaves out, and what it saves.

    python benchmarks/queue_latency.py [--jobs 800] [--gpus 4] [--readers 4] [--duration 20]
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import command_line, positive, whole
from _servers import JupyterServer, finish
from api_load import quantile
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_elastic_gpu.options import Parser

HERE = Path(__file__).resolve().parent
TARGET_P95_MS = 200.0


def job(i: int) -> dict:
    rng = random.Random(i)
    return {
        "name": f"queued-{i:04d}",
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": rng.choice((1, 2, 4)),
        "synthetic": {
            "work": rng.choice((1e5, 3e5, 1e6, 3e6)),
            "throughput": {"1": 100.0, "2": 190.0, "4": 360.0},
        },
    }


async def read_queue(server: JupyterServer, until: float, times: list, said: Counter) -> None:
    client = AsyncHTTPClient()
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        request = HTTPRequest(
            server.api_url + "queue",
            headers={"Authorization": f"token {server.token}"},
            request_timeout=60,
        )
        t0 = time.perf_counter()
        response = await client.fetch(request)
        times.append(time.perf_counter() - t0)
        for entry in json.loads(response.body)["queue"]:
            estimated = entry["estimated_end"] is not None
            said["estimated" if estimated else entry["estimate_limit"] or "none"] += 1


async def churn(server: JupyterServer, until: float, every: float) -> int:
    loop, changes, i = asyncio.get_running_loop(), 0, 10**6
    while loop.time() < until:
        started = loop.time()
        code, doc = await asyncio.to_thread(server.call, "POST", "jobs", job(i))
        if code == 201:
            await asyncio.to_thread(server.call, "POST", f"jobs/{doc['id']}/cancel", {})
            changes += 2
        i += 1
        await asyncio.sleep(max(0.0, started + every - loop.time()))
    return changes


async def phase(server: JupyterServer, readers: int, duration: float, churning: bool):
    loop = asyncio.get_running_loop()
    until = loop.time() + duration
    times: list[float] = []
    said: Counter = Counter()
    tasks = [read_queue(server, until, times, said) for _ in range(readers)]
    changes = 0
    if churning:
        *_, changes = await asyncio.gather(*tasks, churn(server, until, 1.0))
    else:
        await asyncio.gather(*tasks)
    return times, said, changes


def in_process(jobs: int, gpus: int, budget: float, max_jobs: int) -> list[tuple]:
    """The same queue's forward run in this process: (label, seconds, decisions, limits)."""
    from jupyter_elastic_gpu.core.model import Snapshot
    from jupyter_elastic_gpu.models import SubmitRequest
    from jupyter_elastic_gpu.scheduler import estimates, policies, snapshot
    from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
    from jupyter_elastic_gpu.scheduler.jobs import JobRecord

    records = []
    for i in range(jobs):
        spec = SubmitRequest.model_validate(job(i))
        spec, _ = spec.fit_to(gpus)
        record = JobRecord(id=f"j-{i:04d}", user="bench", name="q", spec=spec, job_dir="")
        record.total_work = spec.synthetic.work
        records.append(record)
    snap: Snapshot = snapshot.build(records, SimulatedInventory(gpus).snapshot(), {}, 6.0, 0)
    policy = policies.make("adaptive", {})
    order = [r.id for r in records]
    out = []
    for label, bounded in (("within the budget", True), ("no budget (the whole run)", False)):
        t0 = time.monotonic()
        stop = t0 + budget * estimates.RUN_SHARE
        ahead = estimates.outlook(
            policy,
            snap,
            time.time(),
            order,
            max_jobs if bounded else None,
            (lambda stop=stop: time.monotonic() >= stop) if bounded else (lambda: False),
        )
        played = jobs - len(ahead.skipped)
        out.append((label, time.monotonic() - t0, ahead.decisions, played, ahead.limits))
    return out


def main() -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=whole(), default=800, help="queued synthetic jobs")
    ap.add_argument("--gpus", type=whole(), default=4, help="simulated GPUs")
    ap.add_argument("--readers", type=whole(), default=4, help="clients reading GET queue")
    ap.add_argument("--duration", type=positive, default=20.0, help="seconds of each phase")
    ap.add_argument("--keep", action="store_true", help="keep the server's folder afterwards")
    args = ap.parse_args()
    print(f"$ {command_line()}\n")

    from jupyter_elastic_gpu.scheduler.service import SchedulerService

    budget = SchedulerService.forecast_budget.default_value
    max_jobs = SchedulerService.forecast_jobs.default_value
    root = Path(tempfile.mkdtemp(prefix="elastic-gpu-queue-latency-"))
    launches = root / "launches"
    launches.mkdir()
    fake = root / "sidecar-python"
    shutil.copy(HERE / "_launch_recorder.sh", fake)
    fake.chmod(0o755)
    server = JupyterServer(
        root,
        config={
            "simulated_gpus": args.gpus,
            "LocalLauncher.python": str(fake),
            "SchedulerService.heartbeat_timeout": 3600.0,
            "SchedulerService.max_open_jobs": args.jobs + 100,
            "SchedulerService.tick_interval": 60.0,
        },
        env={"ELASTIC_GPU_BENCH_LAUNCHES": str(launches), "ELASTIC_GPU_BENCH_HOLD_S": "3600"},
    )
    sleepers: list[int] = []
    try:
        server.start()
        t0 = time.monotonic()
        for i in range(args.jobs):
            code, doc = server.call("POST", "jobs", job(i))
            if code != 201:
                raise SystemExit(f"submit {i} answered {code}: {doc}")
        print(f"{args.jobs} jobs submitted in {time.monotonic() - t0:.1f} s")
        sleepers += [int(p.stem) for p in launches.glob("*.launch")]
        AsyncHTTPClient.configure(None, max_clients=args.readers + 10)
        rows = []
        for name, churning in (("steady", False), ("churn", True)):
            times, said, changes = asyncio.run(phase(server, args.readers, args.duration, churning))
            rows.append((name, times, said, changes))
        sleepers += [int(p.stem) for p in launches.glob("*.launch")]
    finally:
        finish(server, sleepers, root, args.keep)

    print(
        f"\nGET queue, {args.jobs} jobs on {args.gpus} simulated GPUs, {args.readers} readers, "
        f"forecast_budget {budget:g} s, forecast_jobs {max_jobs}\n"
    )
    print(
        f"{'phase':<8} {'reads':>6} {'changes':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  "
        "entries: estimated / past forecast_jobs / past the time / none"
    )
    ok = True
    for name, times, said, changes in rows:
        ms = [t * 1000 for t in times]
        p95 = quantile(ms, 0.95)
        ok = ok and p95 < TARGET_P95_MS
        total = sum(said.values()) or 1
        shares = " / ".join(
            f"{100 * said[k] / total:.0f}%" for k in ("estimated", "jobs", "time", "none")
        )
        print(
            f"{name:<8} {len(ms):>6} {changes:>8} {quantile(ms, 0.5):>8.1f} {p95:>8.1f} "
            f"{max(ms):>8.1f}  {shares}"
        )
    print(f"\ntarget: p95 under {TARGET_P95_MS:.0f} ms: {'met' if ok else 'NOT met'}")

    print("\nthe same queue's forward run in this process:\n")
    print(f"{'run':<28} {'seconds':>8} {'decisions':>10} {'jobs played':>12}  limits")
    for label, seconds, decisions, played, limits in in_process(
        args.jobs, args.gpus, budget, max_jobs
    ):
        print(
            f"{label:<28} {seconds:>8.3f} {decisions:>10} {played:>12}  {', '.join(limits) or '-'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
