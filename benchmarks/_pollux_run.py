"""One run of the Pollux artifact's own simulator, with batch-size tuning or without it.

Run by ``pollux_batch_sizes.py`` with the artifact's interpreter (its pinned numpy, pandas and
pymoo 0.4 cannot share our environment), so it imports nothing of ours:

    python _pollux_run.py ARTIFACT_SIMULATOR_DIR WORKLOAD_CSV NODES tuned|fixed

prints one JSON line: mean JCT, makespan from the first submission, restarts per job, jobs,
wall time.

``fixed`` takes away the one lever a non-intrusive scheduler does not have: every job keeps
the batch size its workload row gives (the one the other policies of the artifact run at), and
the scheduler sees each job's fitted throughput at that batch size as its speed-up (statistical
efficiency is then the same at every count, so goodput is throughput), with at most as many
replicas as keep ``min_local_bsz`` samples each. Everything else (the genetic search, the
restart cost, the rounds, the fitted models) is the artifact's own.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import os
import sys
import time

import numpy as np

_EPS = 1e-8  # the artifact's rounding tolerance for ceil


class FixedBatchSpeedup:
    """The speed-up of a job whose batch size stays ``batch``: throughput at a count over
    throughput on one GPU, the local batch split as the artifact splits a fixed batch size
    (``Job.update_local_bsz``)."""

    def __init__(self, goodput_fn, batch: int, app) -> None:
        self._goodput, self._batch, self._app = goodput_fn, batch, app
        self._memo: dict[tuple[int, int], float] = {}
        self._base = self._throughput(1, 1)

    def _throughput(self, nodes: int, replicas: int) -> float:
        if replicas == 0:
            return 0.0
        found = self._memo.get((nodes, replicas))
        if found is None:
            app = self._app
            local = math.ceil(self._batch / replicas - _EPS)
            accum = math.ceil(local / app.max_local_bsz - _EPS) - 1
            if replicas == 1 and self._batch > app.init_batch_size:
                accum = max(1, accum)
            atomic = math.ceil(local / (accum + 1) - _EPS)
            atomic = min(atomic, int(app.max_batch_size / (replicas * (accum + 1))))
            found = 0.0
            if atomic >= 1:
                found = float(self._goodput.throughput(nodes, replicas, atomic, accum))
            self._memo[(nodes, replicas)] = found
        return found

    def __call__(self, num_nodes, num_replicas):
        shape = np.broadcast(num_nodes, num_replicas).shape
        nodes = np.broadcast_to(num_nodes, shape).flatten()
        replicas = np.broadcast_to(num_replicas, shape).flatten()
        out = np.array(
            [self._throughput(int(n), int(r)) / self._base for n, r in zip(nodes, replicas)]
        ).reshape(shape)
        return out.item() if np.isscalar(num_nodes) and np.isscalar(num_replicas) else out


def fix_batch_sizes(sim) -> None:
    """Patch the artifact's simulator module ``sim`` so that Pollux runs every job at its
    workload's batch size."""
    init, job_info = sim.Cluster.__init__, sim.Cluster.get_pollux_job_info

    def cluster_init(self, workload, policy, *args, **kwargs):
        init(self, workload, policy, *args, **kwargs)
        if isinstance(policy, sim.PolluxPolicy):
            for job, row in zip(self.jobs, workload.itertuples()):
                job.target_batch_size = row.batch_size

    def speedup_fn(self):
        if self.perf_params is None:  # nothing fitted yet: the artifact's own guess
            return lambda nodes, replicas: replicas
        return FixedBatchSpeedup(self.get_goodput_fn(), self.target_batch_size, self.application)

    def pollux_job_info(self, job):
        info = job_info(self, job)
        most = job.target_batch_size // job.application.min_local_bsz
        info.max_replicas = max(1, min(info.max_replicas, most))
        return info

    sim.Cluster.__init__ = cluster_init
    sim.Job.get_speedup_fn = speedup_fn
    sim.Cluster.get_pollux_job_info = pollux_job_info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifact", help="the artifact's simulator/ folder")
    ap.add_argument("workload", help="a workload CSV in the artifact's format")
    ap.add_argument("nodes", type=int, help="nodes of 4 GPUs")
    ap.add_argument("mode", choices=("tuned", "fixed"))
    args = ap.parse_args()
    workload = os.path.abspath(args.workload)
    os.chdir(args.artifact)  # it reads its traces relative to the working directory
    sys.path.insert(0, os.getcwd())
    sim = importlib.import_module("simulator")
    if args.mode == "fixed":
        fix_batch_sizes(sim)
    settings = argparse.Namespace(
        workload=workload,
        policy="pollux",
        min_nodes=args.nodes,
        max_nodes=None,
        interval=60,
        interference=0.0,
        num_gpus=4,
        low_util=None,
        high_util=None,
        output=None,
    )
    began = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()):  # it prints every round
        logs, jcts = sim.simulate(settings)
    jobs = logs[-1]["submitted_jobs"]
    first = min(j["submission_time"] for j in jobs)
    last = max(j["completion_time"] for j in jobs)
    print(
        json.dumps(
            {
                "mean_jct_s": sum(jcts.values()) / len(jcts),
                "makespan_s": last - first,
                "restarts_per_job": sum(j["num_restarts"] or 0 for j in jobs) / len(jobs),
                "jobs": len(jcts),
                "wall_s": time.monotonic() - began,
            }
        )
    )


if __name__ == "__main__":
    main()
