"""Load on the live scheduler API: many sidecars heartbeating while many clients poll the jobs.

A real Jupyter server with the extension (a subprocess) gets ``--jobs`` synthetic jobs of one
GPU each on as many simulated GPUs, so that every job is admitted and launched. Its launcher is
real too; only the sidecar's Python is replaced by ``_launch_recorder.sh``, which records what
the launcher hands a sidecar (the job's secret, ``--job-id``, ``--generation``, ``--gpus``,
``--scheduler-url``, ``--heartbeat``) and stays alive as a ``sleep``. For each launch this
script then runs a synthetic sidecar client that heartbeats the real route, with the real
secret, once per heartbeat interval: realistic bodies, a new progress record each time, the
generation of the grant it was given. ``--pollers`` clients GET ``jobs`` once a second
meanwhile, all on one event loop (tornado's AsyncHTTPClient, which opens a connection per
request, as the sidecar's urllib does). Each client sends its next request one interval after
the previous one was sent, or at once if the answer came later (closed loop).

At the end every sidecar sends its final heartbeat (``done``), the server is stopped with
SIGTERM, and its SQLite database is opened read-only to check that no update was lost: every
progress record a 2xx heartbeat carried is stored, the last stored one is the last one sent,
and each job's stored document holds that record and its final state.

    python benchmarks/api_load.py [--jobs 200] [--pollers 50] [--duration 60] [--interval 1]
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from _common import command_line, positive, whole
from _servers import JupyterServer, finish
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_elastic_gpu.options import Parser

HERE = Path(__file__).resolve().parent
TARGET_P99_MS = 100.0
#: Progress records the store keeps per job (``Store.open``'s default): older ones are dropped.
PROGRESS_LIMIT = 2000


def as_stored(record: dict) -> str:
    """A progress record as the scheduler keeps it (validated; fields without a value left
    out), as JSON with sorted keys, for comparing what was sent with what was stored."""
    from jupyter_elastic_gpu.models import ProgressRecord

    stored = ProgressRecord.model_validate(record).model_dump(exclude_none=True)
    return json.dumps(stored, sort_keys=True)


@dataclass
class Launch:
    """What the launcher handed one sidecar."""

    pid: int
    secret: str
    job_id: str
    generation: int
    gpus: list[str]
    url: str
    heartbeat_s: float

    @classmethod
    def read(cls, path: Path) -> Launch:
        fields = path.read_bytes().split(b"\0")[:-1]
        secret, argv = fields[0].decode(), [f.decode() for f in fields[1:]]

        def opt(name: str) -> str:
            return argv[argv.index(name) + 1]

        return cls(
            pid=int(path.stem),
            secret=secret,
            job_id=opt("--job-id"),
            generation=int(opt("--generation")),
            gpus=opt("--gpus").split(","),
            url=opt("--scheduler-url"),
            heartbeat_s=float(opt("--heartbeat")),
        )


@dataclass
class Stats:
    """Latency (s) of every answered request per kind; failures with what went wrong."""

    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    sent: int = 0
    slow_at: list[float] = field(default_factory=list)  # perf_counter at the start of each

    async def fetch(self, client: AsyncHTTPClient, kind: str, request: HTTPRequest):
        """The response if it was a 2xx, else None (the failure is counted)."""
        self.sent += 1
        t0 = time.perf_counter()
        try:
            response = await client.fetch(request, raise_error=False)
        except Exception as e:  # a connection refused, a timeout: an error like a 5xx
            self.errors[kind].append(f"{type(e).__name__}: {e}")
            return None
        latency = time.perf_counter() - t0
        self.latency[kind].append(latency)
        if latency * 1000 > TARGET_P99_MS:
            self.slow_at.append(t0)
        if not 200 <= response.code < 300:
            detail = response.body[:200].decode(errors="replace") if response.body else ""
            self.errors[kind].append(f"HTTP {response.code} {detail}".strip())
            return None
        return response


class SyntheticSidecar:
    """Heartbeats like a sidecar whose trainer reports progress every interval."""

    def __init__(self, launch: Launch, speed: float, batch: int = 32) -> None:
        self.launch, self.speed, self.batch = launch, speed, batch
        self.steps = 0
        self.t_last: float | None = None
        self.acked: list[dict] = []  # progress records of heartbeats answered 2xx
        self.unacked: list[dict] = []  # sent, but the answer was an error or never came
        self.wrong_grants = 0

    def record(self, **extra) -> dict:
        now = time.time()
        rate = None
        if self.t_last is not None:
            new = max(1, round(self.speed * (now - self.t_last) / self.batch))
            self.steps += new
            rate = round(new * self.batch / (now - self.t_last), 3)
        self.t_last = now
        return {
            "t": round(now, 3),
            "generation": self.launch.generation,
            "replicas": len(self.launch.gpus),
            "epoch": 0,
            "epochs": 1,
            "step_in_epoch": self.steps,
            "steps_per_epoch": 10**9,
            "global_step": self.steps,
            "samples": self.steps * self.batch,
            "loss": round(1.0 / (1.0 + self.steps), 6),
            "metrics": {},
            "samples_per_s": rate,
            "batch_size": self.batch,
            **extra,
        }

    def body(self, state: str, record: dict) -> dict:
        rates = [r["samples_per_s"] for r in self.acked[-10:] if r["samples_per_s"]]
        n = str(len(self.launch.gpus))
        return {
            "job_id": self.launch.job_id,
            "generation": self.launch.generation,
            "gpus": self.launch.gpus,
            "state": state,
            "progress": record,
            "throughput": {n: sorted(rates)[len(rates) // 2]} if rates else {},
            "resize_cost_s": None,
            "sidecar_pid": self.launch.pid,
            "trainer_pid": self.launch.pid,
            "restarts": 0,
            "error": None,
            "exit_code": 0 if state == "done" else None,
        }

    async def beat(self, client, stats: Stats, kind: str, state: str, record: dict) -> None:
        request = HTTPRequest(
            self.launch.url,
            method="POST",
            body=json.dumps(self.body(state, record)),
            headers={
                "Authorization": f"Bearer {self.launch.secret}",
                "Content-Type": "application/json",
            },
            connect_timeout=10,
            request_timeout=20,
        )
        response = await stats.fetch(client, kind, request)
        if response is None:
            self.unacked.append(record)
            return
        self.acked.append(record)
        grant = json.loads(response.body)
        expected = {"generation": self.launch.generation, "gpus": self.launch.gpus}
        if state != "done" and (
            grant.get("action") != "run" or {k: grant.get(k) for k in expected} != expected
        ):
            self.wrong_grants += 1

    async def run(self, client, stats: Stats, until: float) -> None:
        loop = asyncio.get_running_loop()
        interval = self.launch.heartbeat_s
        await asyncio.sleep(random.uniform(0, interval))
        first = True
        while loop.time() < until:
            started = loop.time()
            record = self.record(first=True, pid=self.launch.pid, resumed_from=0) if first else None
            await self.beat(client, stats, "heartbeat", "running", record or self.record())
            first = False
            await asyncio.sleep(max(0.0, started + interval - loop.time()))
        await self.beat(client, stats, "heartbeat (final, done)", "done", self.record())


async def poll_jobs(client, stats: Stats, server: JupyterServer, until: float, every: float):
    loop = asyncio.get_running_loop()
    await asyncio.sleep(random.uniform(0, every))
    while loop.time() < until:
        started = loop.time()
        request = HTTPRequest(
            server.api_url + "jobs",
            headers={"Authorization": f"token {server.token}"},
            connect_timeout=10,
            request_timeout=20,
        )
        await stats.fetch(client, "GET jobs", request)
        await asyncio.sleep(max(0.0, started + every - loop.time()))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_database(db: Path, sidecars: list[SyntheticSidecar]) -> tuple[list[str], int]:
    """Problems found (empty: no update lost) and the number of progress rows."""
    problems: list[str] = []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        total_rows = con.execute("SELECT COUNT(*) FROM progress").fetchone()[0]
        for sc in sidecars:
            job_id = sc.launch.job_id
            rows = [
                json.loads(r)
                for (r,) in con.execute(
                    "SELECT record FROM progress WHERE job_id = ? ORDER BY t, rowid", (job_id,)
                )
            ]
            if not sc.acked:
                problems.append(f"{job_id}: no heartbeat of its sidecar was acknowledged")
                continue
            stored = {json.dumps(r, sort_keys=True) for r in rows}
            acked = [as_stored(r) for r in sc.acked[-PROGRESS_LIMIT:]]
            sent = set(acked) | {as_stored(r) for r in sc.unacked}
            missing = [r for r in acked if r not in stored]
            if missing:
                problems.append(f"{job_id}: {len(missing)} acknowledged progress records missing")
            if not stored <= sent:
                problems.append(f"{job_id}: {len(stored - sent)} stored records never sent")
            if not rows or json.dumps(rows[-1], sort_keys=True) != as_stored(sc.acked[-1]):
                problems.append(f"{job_id}: the last stored record is not the last one sent")
            row = con.execute("SELECT state, data FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                problems.append(f"{job_id}: not in the jobs table")
                continue
            state, data = row[0], json.loads(row[1])
            last = json.dumps(data.get("progress"), sort_keys=True)
            if state != "done" or last != as_stored(sc.acked[-1]):
                problems.append(
                    f"{job_id}: stored as {state!r} with another progress record than the last"
                )
    finally:
        con.close()
    return problems, total_rows


def main() -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=whole(), default=200, help="synthetic sidecars (one job each)")
    ap.add_argument("--pollers", type=whole(), default=50, help="clients polling GET jobs")
    ap.add_argument("--duration", type=positive, default=60.0, help="seconds of load")
    ap.add_argument("--interval", type=positive, default=1.0, help="heartbeat and poll interval")
    ap.add_argument("--keep", action="store_true", help="keep the server's folder afterwards")
    args = ap.parse_args()
    print(f"$ {command_line()}\n")

    root = Path(tempfile.mkdtemp(prefix="elastic-gpu-api-load-"))
    launches_dir = root / "launches"
    launches_dir.mkdir()
    fake = root / "sidecar-python"
    shutil.copy(HERE / "_launch_recorder.sh", fake)
    fake.chmod(0o755)
    hold_s = args.duration + 600
    server = JupyterServer(
        root,
        config={
            "simulated_gpus": max(args.jobs, 1),
            "LocalLauncher.python": str(fake),
            "SchedulerService.heartbeat_interval": args.interval,
            "SchedulerService.heartbeat_timeout": 30.0,
            "SchedulerService.tick_interval": 10.0,
        },
        env={
            "ELASTIC_GPU_BENCH_LAUNCHES": str(launches_dir),
            "ELASTIC_GPU_BENCH_HOLD_S": f"{hold_s:.0f}",
        },
    )
    sleepers: list[int] = []
    try:
        server.start()
        return asyncio.run(run(args, server, launches_dir, sleepers))
    finally:
        finish(server, sleepers, root, args.keep)


async def run(args, server: JupyterServer, launches_dir: Path, sleepers: list[int]) -> int:
    rng = random.Random(1)
    t_setup = time.monotonic()
    for i in range(args.jobs):
        speed = rng.choice((100.0, 190.0, 360.0, 700.0))
        code, job = server.call(
            "POST",
            "jobs",
            {
                "name": f"load-{i:03d}",
                "kind": "synthetic",
                "min_gpus": 1,
                "max_gpus": 1,
                "synthetic": {"work": 1e12, "throughput": {"1": speed}},
            },
        )
        if code != 201:
            raise SystemExit(f"submit {i} answered {code}: {job}")
    deadline = time.monotonic() + 120
    while len(list(launches_dir.glob("*.launch"))) < args.jobs:
        if time.monotonic() > deadline:
            found = len(list(launches_dir.glob("*.launch")))
            raise SystemExit(f"only {found} of {args.jobs} sidecars launched in 120 s")
        await asyncio.sleep(0.1)
    launches = [Launch.read(p) for p in sorted(launches_dir.glob("*.launch"))]
    sleepers.extend(launch.pid for launch in launches)
    if len({launch.job_id for launch in launches}) != args.jobs:
        raise SystemExit("a job was launched twice: see the server log")
    setup_s = time.monotonic() - t_setup

    AsyncHTTPClient.configure(None, max_clients=args.jobs + args.pollers + 50)
    client = AsyncHTTPClient()
    stats = Stats()
    sidecars = [SyntheticSidecar(launch, rng.choice((100.0, 360.0))) for launch in launches]
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    cpu0 = cpu_seconds(server.proc.pid)
    own0 = time.process_time()
    t0 = loop.time()
    until = t0 + args.duration
    await asyncio.gather(
        *(sc.run(client, stats, until) for sc in sidecars),
        *(poll_jobs(client, stats, server, until, args.interval) for _ in range(args.pollers)),
    )
    elapsed = loop.time() - t0
    server_cpu = cpu_seconds(server.proc.pid) - cpu0
    own_cpu = time.process_time() - own0

    jobs = server.get("jobs")["jobs"]
    not_done = [j["id"] for j in jobs if j["state"] != "done"]
    stopped = server.stop()
    problems, rows = check_database(server.db_path, sidecars)
    if not_done:
        problems.append(f"{len(not_done)} jobs not done after their final heartbeat")
    if stopped not in (0, -signal.SIGTERM):
        problems.append(f"the server exited with {stopped} on SIGTERM")
    wrong = sum(sc.wrong_grants for sc in sidecars)
    if wrong:
        problems.append(f"{wrong} heartbeats were answered another grant than the one given")

    print(
        f"{args.jobs} synthetic sidecars heartbeating every {args.interval:g} s, "
        f"{args.pollers} clients polling GET jobs every {args.interval:g} s, "
        f"for {elapsed:.1f} s on {os.cpu_count()} CPU cores (server and clients share them)"
    )
    print(f"setup: {args.jobs} jobs submitted, admitted and launched in {setup_s:.1f} s\n")
    header = f"{'route':<26}{'requests':>9}{'errors':>8}{'p50 ms':>9}{'p95 ms':>9}"
    header += f"{'p99 ms':>9}{'max ms':>9}"
    print(header)
    print("-" * len(header))
    worst_p99 = 0.0
    for kind in ("heartbeat", "GET jobs", "heartbeat (final, done)"):
        lat = [x * 1000 for x in stats.latency.get(kind, [])]
        errors = len(stats.errors.get(kind, []))
        if not lat:
            print(f"{kind:<26}{0:>9}{errors:>8}")
            continue
        p99 = quantile(lat, 0.99)
        if kind != "heartbeat (final, done)":
            worst_p99 = max(worst_p99, p99)
        print(
            f"{kind:<26}{len(lat) + errors:>9}{errors:>8}{quantile(lat, 0.5):>9.1f}"
            f"{quantile(lat, 0.95):>9.1f}{p99:>9.1f}{max(lat):>9.1f}"
        )
    errors = sum(len(v) for v in stats.errors.values())
    print(
        f"\nrequests sent: {stats.sent} ({stats.sent / elapsed:.0f}/s); errors (non-2xx or "
        f"exceptions): {errors}"
    )
    for kind, items in stats.errors.items():
        for item in sorted(set(items))[:5]:
            print(f"  {kind}: {item} (x{items.count(item)})")
    if stats.slow_at:
        # Stalls show as clusters: many slow requests started within the same second.
        seconds = defaultdict(int)
        for t in stats.slow_at:
            seconds[int(t - start)] += 1
        busiest = ", ".join(f"{s}s:{n}" for s, n in sorted(seconds.items()) if n >= 5)
        print(
            f"requests over {TARGET_P99_MS:.0f} ms: {len(stats.slow_at)}; seconds of the run "
            f"with 5 or more of them: {busiest or 'none'}"
        )
    print(
        f"CPU: server {server_cpu:.1f} s ({100 * server_cpu / elapsed:.0f}% of a core), "
        f"load clients {own_cpu:.1f} s ({100 * own_cpu / elapsed:.0f}% of a core)"
    )
    acked = sum(len(sc.acked) for sc in sidecars)
    print(
        f"database: {rows} progress rows for {acked} acknowledged progress records; "
        + ("no lost updates" if not problems else f"{len(problems)} problems:")
    )
    for problem in problems[:20]:
        print(f"  {problem}")
    ok = not problems and errors == 0 and worst_p99 < TARGET_P99_MS
    print(
        f"\ntargets: p99 < {TARGET_P99_MS:.0f} ms ({worst_p99:.1f} ms), no errors ({errors}), "
        f"no lost updates ({'none' if not problems else len(problems)}): "
        + ("met" if ok else "NOT met")
    )
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
