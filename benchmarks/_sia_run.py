"""One run of the Sia artifact's own simulator (SOSP'23), on its homogeneous 64-GPU cluster or
(``--heterogeneous``) its mixed one.

Run by ``sia_compare.py`` with the artifact's interpreter (its pinned numpy, pandas, pymoo 0.4
and cvxpy with CBC cannot share our environment), so it imports nothing of ours:

    python _sia_run.py ARTIFACT_SIA_SIMULATOR_DIR WORKLOAD_CSV MODE [--limit-s S] [--threads N]
        [--heterogeneous]
    python _sia_run.py ARTIFACT_SIA_SIMULATOR_DIR --describe [--heterogeneous]

prints one JSON line: mean JCT, makespan from the first submission (as the artifact's
``utils/print_run_stats.py``), restarts per job (its ``num_restarts``: every new allocation
after a job's first), jobs, simulated rounds, wall time. ``--describe`` prints the settings the
other side of the comparison needs: the cluster (its kinds of GPU: nodes and GPUs per node
each), the per-kind, per-application restart times and the per-application slowdowns the
artifact's jobs run with.

MODE is one of

* ``sia``: ``multi_simulator.py --policy=sia`` with ``run_experiment.sh``'s settings (p=-0.5,
  lambda_a=0.01, lambda_n=1.1, 60 s rounds, ``--project_throughputs --share_max_replicas``);
* ``sia-fixed``: the same with ``--disable_bsz_tuning`` (the artifact's own switch: every job
  at its workload row's batch size, scaling only its GPU count);
* ``pollux``: ``multi_simulator_unaware.py --policy=pollux --policy_p_val=-1``, 60 s rounds;
* ``pollux-fixed``: the same with each job's batch size fixed as the artifact fixes Sia's
  (``Job.disable_bsz_tuning`` and the row's batch size as the job's target; the artifact has
  no switch for Pollux), and at most as many GPUs as keep ``min_local_bsz`` samples each;
* ``gavel``: ``multi_simulator.py --policy=gavel`` with ``run_experiment.sh``'s 360 s rounds
  (the artifact runs Gavel at each job's row batch size).

The cluster is the artifact's homogeneous one: ``simulator_config.cluster_nnodes`` set to the
line the artifact leaves commented out there (``{"aws": 16}``: 16 nodes of 4 T4 GPUs), at run
time; with ``--heterogeneous``, the one it sets there "for experiments" (6 nodes of 4 T4, 2 of
8 A100, 3 of 8 RTX 2080Ti). The artifact's files are not changed. CBC runs on ``--threads`` threads (the artifact's
8 would oversubscribe a small machine; a MIP gap of 1e-4 either way) and quietly.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import sys
import time

#: The homogeneous cluster of the artifact's ``simulator_config.py`` (commented out there).
HOMOGENEOUS = {"aws": 16}
MODES = ("sia", "sia-fixed", "pollux", "pollux-fixed", "gavel")


class _Silent:
    """Stands in for ``rich``'s Console and Table, which the artifact draws every round."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def configure(threads: int, heterogeneous: bool):
    """The artifact's config module, set for its homogeneous cluster unless ``heterogeneous``
    (then its own default, the mixed one)."""
    sim_config = importlib.import_module("simulator_config")
    if not heterogeneous:
        sim_config.cluster_nnodes = dict(HOMOGENEOUS)
    sim_config.sia_solver_num_threads = threads
    sim_config.sia_solver_verbose = False
    sim_config.log_sched_decisions = False
    sim_config.log_cluster_verbose = False
    return sim_config


def describe(sim_config) -> dict:
    apps = importlib.import_module("applications").APPLICATIONS
    kinds = list(sim_config.cluster_nnodes.items())
    return {
        "kinds": [[gpu, n, sim_config.cluster_ngpus_per_node[gpu]] for gpu, n in kinds],
        "restart_s": {
            gpu: {name: app.rescale_time for name, app in apps[gpu].items()} for gpu, _ in kinds
        },
        "slowdown": dict(sim_config.SLOWDOWNS),
    }


def limit_rounds(cluster_class, limit_s: float | None) -> None:
    """Stop the simulation after ``limit_s`` simulated seconds (to time a short run)."""
    if limit_s is None:
        return
    done = cluster_class.all_complete
    cluster_class.all_complete = lambda self: done(self) or self.current_time >= limit_s


def fix_pollux_batch_sizes(cluster_unaware) -> None:
    """Every Pollux job at its row's batch size, as ``--disable_bsz_tuning`` fixes Sia's."""
    cls = cluster_unaware.ClusterUnaware
    init, job_info = cls.__init__, cls.get_unaware_job_info

    def cluster_init(self, workload, policy, *args, **kwargs):
        init(self, workload, policy, *args, **kwargs)
        for job, row in zip(self.jobs, workload.itertuples()):
            job.target_batch_size = row.batch_size
            job.disable_bsz_tuning()

    def unaware_job_info(self, job):
        info = job_info(self, job)
        most = job.target_batch_size // job.applications["aws"].min_local_bsz
        info.max_replicas = max(1, min(info.max_replicas, most))
        return info

    cls.__init__ = cluster_init
    cls.get_unaware_job_info = unaware_job_info


def run(workload: str, mode: str, limit_s: float | None) -> dict:
    if mode.startswith("sia") or mode == "gavel":
        entry = importlib.import_module("multi_simulator")
        entry.Console = entry.Table = _Silent
        limit_rounds(entry.Cluster, limit_s)
        settings = argparse.Namespace(
            workload=workload,
            policy="gavel" if mode == "gavel" else "sia",
            policy_p_val=-0.5,
            mip_lambda_n=1.1,
            mip_lambda_a=0.01,
            cluster_scale=None,
            project_throughputs=True,
            disable_bsz_tuning=mode == "sia-fixed",
            share_max_replicas=True,
            oracle_num_nodes=0,
            oracle_num_replicas=0,
            interval=360 if mode == "gavel" else 60,
            output=None,
            debug=False,
        )
    else:
        entry = importlib.import_module("multi_simulator_unaware")
        limit_rounds(entry.ClusterUnaware, limit_s)
        if mode == "pollux-fixed":
            fix_pollux_batch_sizes(importlib.import_module("cluster_unaware"))
        settings = argparse.Namespace(
            workload=workload,
            policy="pollux",
            policy_p_val=-1.0,
            mip_lambda_n=None,
            mip_lambda_a=None,
            cluster_scale=None,
            interval=60,
            output=None,
            debug=False,
            nfuture=5,
        )
    began = time.monotonic()
    logs, jcts = entry.multi_simulate(settings)
    wall = time.monotonic() - began
    jobs = logs[-1]["submitted_jobs"] if logs else []
    finished = [j for j in jobs if j["completion_time"] is not None]
    with open(workload, newline="") as f:
        rows = list(csv.DictReader(f))
    partial = len(finished) < len(rows)
    first = min(float(row["time"]) for row in rows)
    return {
        "mean_jct_s": sum(jcts.values()) / len(jcts) if jcts else None,
        "makespan_s": None
        if partial
        else max(j["submission_time"] + jcts[j["name"]] for j in jobs) - first,
        "restarts_per_job": sum(j["num_restarts"] or 0 for j in jobs) / len(rows),
        "jobs": len(rows),
        "finished": len(finished),
        "partial": partial,
        "rounds": len(logs),
        "simulated_s": logs[-1]["timestamp"] if logs else 0,
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifact", help="the artifact's sia-simulator/ folder")
    ap.add_argument("workload", nargs="?", help="a workload CSV in the artifact's format")
    ap.add_argument("mode", nargs="?", choices=MODES)
    ap.add_argument("--describe", action="store_true", help="print the settings, run nothing")
    ap.add_argument("--limit-s", type=float, help="stop after this many simulated seconds")
    ap.add_argument("--threads", type=int, default=1, help="CBC threads (the artifact: 8)")
    ap.add_argument(
        "--heterogeneous", action="store_true", help="the artifact's mixed cluster, not 16 x 4 T4"
    )
    args = ap.parse_args()
    if not args.describe and (args.workload is None or args.mode is None):
        ap.error("give a workload and a mode, or --describe")
    workload = None if args.workload is None else os.path.abspath(args.workload)
    os.chdir(args.artifact)
    sys.path.insert(0, os.getcwd())
    # The artifact prints every round, and CBC prints from C: both go to /dev/null, the result
    # to what was standard output.
    result_out = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the rest of the process
    sim_config = configure(args.threads, args.heterogeneous)
    result = describe(sim_config) if args.describe else run(workload, args.mode, args.limit_s)
    result_out.write(json.dumps(result) + "\n")
    result_out.flush()


if __name__ == "__main__":
    main()
