"""Lower bounds no schedule can beat, printed beside every result.

* **Mean JCT**: every job alone on the cluster at its fastest allowed GPU count (packed onto as
  few nodes as possible), after the start cost every job pays.
* **Makespan**: a perfect packing. For every arrival time t, the work submitted at or after t
  needs at least its GPU-time at each job's most efficient count, spread over all GPUs, after t;
  and no job can finish before its own best time. The largest of these, minus the first
  submission.
"""

from __future__ import annotations

from .workload import JobSpec, Workload


def _compact(gpus: int, per_node: int) -> tuple[int, ...]:
    full, rest = divmod(gpus, per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def _counts(job: JobSpec, total: int) -> range:
    return range(job.min_gpus, min(job.max_gpus, total) + 1)


def best_time(job: JobSpec, total: int, per_node: int) -> float:
    """Seconds the job needs alone at its fastest allowed count."""
    speeds = [job.true_throughput(_compact(g, per_node)) for g in _counts(job, total)]
    fastest = max(speeds, default=0.0)
    return job.work / fastest if fastest > 0 else float("inf")


def min_gpu_time(job: JobSpec, total: int, per_node: int) -> float:
    """GPU-seconds the job needs at its most efficient allowed count."""
    costs = [
        g * job.work / x
        for g in _counts(job, total)
        if (x := job.true_throughput(_compact(g, per_node))) > 0
    ]
    return min(costs, default=float("inf"))


def lower_bounds(
    workload: Workload, total_gpus: int, gpus_per_node: int, start_cost_s: float = 0.0
) -> dict[str, float]:
    jobs = workload.jobs  # sorted by submit time
    best = [
        (start_cost_s if j.restart_s is None else j.restart_s)
        + best_time(j, total_gpus, gpus_per_node)
        for j in jobs
    ]
    first = jobs[0].submit_time
    finish = max(j.submit_time + b for j, b in zip(jobs, best))
    suffix = 0.0
    for j in reversed(jobs):
        suffix += min_gpu_time(j, total_gpus, gpus_per_node)
        finish = max(finish, j.submit_time + suffix / total_gpus)
    return {"makespan_s": finish - first, "mean_jct_s": sum(best) / len(best)}
