"""Launch and resize overhead through Ray against the single-server launcher, side by side.

One real Jupyter server subprocess per run, alternating backends round by round on equal
terms: ``local`` (4 simulated GPUs, sidecars as child processes) and ``ray`` (a local Ray
cluster started here: one node with 4 logical GPUs, sidecars in actors pinned to it). Each run:
a job A (1-4 GPUs) starts alone on 4 GPUs, then job B (2 GPUs) arrives and A is resized to 2,
and both finish. From the API's events and progress records:

* start: the decision to admit a job until its first training step (both jobs);
* resize: the decision to resize A until its first step on the new grant.

    python benchmarks/cluster_overhead.py [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import command_line, output_file, whole, write_json
from _servers import JupyterServer

from jupyter_elastic_gpu.options import Parser

BACKENDS = ("local", "ray")
GPUS = 4


def synthetic(name: str, work: int, lo: int, hi: int) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": lo,
        "max_gpus": hi,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
    }


def wait(server: JupyterServer, check, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}\n{server.log_tail()}")


def one_run(backend: str, root: Path, ray_address: str) -> dict[str, list[float]]:
    config: dict = {
        "SchedulerService.tick_interval": 2.0,
        "SchedulerService.heartbeat_interval": 0.5,
        "SchedulerService.default_resize_cost": 1.0,
    }
    if backend == "ray":
        config |= {"cluster_backend": "ray", "ray_address": ray_address, "ray_allow_insecure": True}
    else:
        config["simulated_gpus"] = GPUS
    server = JupyterServer(root, config=config, env={"ELASTIC_GPU_PROGRESS_INTERVAL": "0.2"})
    server.start()
    try:
        a = server.call("POST", "jobs", synthetic("A", 6_000, 1, GPUS))[1]

        def a_on(n):
            job = server.get(f"jobs/{a['id']}")
            return job if job["state"] == "running" and len(job["gpus"]) == n else None

        wait(server, lambda: a_on(GPUS), "A on 4 GPUs")
        b = server.call("POST", "jobs", synthetic("B", 1_000, 2, 2))[1]
        ids = (a["id"], b["id"])

        def finished():
            jobs = [server.get(f"jobs/{i}") for i in ids]
            if any(j["state"] in ("failed", "cancelled") for j in jobs):
                raise SystemExit(f"{backend}: a job did not finish: {jobs}")
            return all(j["state"] == "done" for j in jobs)

        wait(server, finished, "A and B to finish", timeout=300)
        out: dict[str, list[float]] = {"start": [], "resize": []}
        for job_id in ids:
            first: dict[int, float] = {}
            for r in server.get(f"jobs/{job_id}/progress")["progress"]:
                first.setdefault(r["generation"], r["t"])
            for e in server.get(f"jobs/{job_id}/events")["events"]:
                gen = (e.get("data") or {}).get("generation")
                kind = {"admitted": "start", "resize": "resize"}.get(e["kind"])
                if kind and gen in first:
                    out[kind].append(first[gen] - e["t"])
        return out
    finally:
        server.stop()


def start_ray(tmp: Path):
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["RAY_TMPDIR"] = str(tmp)
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1, num_gpus=GPUS, node_ip_address="127.0.0.2")
    cluster.wait_for_nodes()
    return cluster


def main() -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=whole(), default=3, help="runs of each backend")
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()
    output_file(parser, args.json, "--json")
    tmp = Path(tempfile.mkdtemp(prefix="cluster-overhead-"))
    cluster = start_ray(tmp / "ray")
    results: dict[str, dict[str, list[float]]] = {b: {"start": [], "resize": []} for b in BACKENDS}
    try:
        for r in range(args.rounds):
            for backend in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
                got = one_run(backend, tmp / f"{backend}-{r}", cluster.address)
                for kind, values in got.items():
                    results[backend][kind] += values
                print(f"  round {r + 1}/{args.rounds} {backend}: done", flush=True)
    finally:
        cluster.shutdown()
    print(f"\n$ {command_line()}")
    print(
        f"{'seconds (median of ' + str(args.rounds) + ' runs)':<32}{'local':>8}{'ray':>8}{'ray/local':>11}"
    )
    for kind in ("start", "resize"):
        local = statistics.median(results["local"][kind])
        ray = statistics.median(results["ray"][kind])
        print(f"{kind:<32}{local:>8.2f}{ray:>8.2f}{ray / local:>10.2f}x")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
