"""The critical path (``core.policies.critical``) and what it changes in ``adaptive``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jupyter_elastic_gpu.core import Gpu, Job, Snapshot, SpeedModel
from jupyter_elastic_gpu.core.mechanism import sidecar
from jupyter_elastic_gpu.core.policies import AdaptivePolicy, make_policy
from jupyter_elastic_gpu.core.policies.critical import critical_path, horizon
from jupyter_elastic_gpu.core.policies.critical_holds import holds_between
from jupyter_elastic_gpu.sim.bounds import lower_bounds
from jupyter_elastic_gpu.sim.engine import SimConfig, simulate
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload

ROOT = {g: 10.0 * g**0.5 for g in range(1, 17)}  # sub-linear: 4 GPUs go twice as fast as 1
LINEAR = {g: 10.0 * g for g in range(1, 17)}


def job(job_id, work, speed=ROOT, gpus=(), hi=16, submit=0.0) -> Job:
    return Job(
        job_id,
        submit,
        work,
        min_gpus=1,
        max_gpus=hi,
        speed=SpeedModel(speed),
        gpus=tuple(gpus),
        started=bool(gpus),
    )


def test_the_horizon_is_the_packed_work_and_no_less_than_the_longest_job():
    from jupyter_elastic_gpu.core.policies.critical import _options

    shorts = [job(f"s{i}", 1000.0) for i in range(8)]  # 100 GPU-s each at one GPU
    opts = [_options(j, 8) for j in shorts]
    assert horizon(opts, 0.0, 8) == pytest.approx(100.0)  # 800 GPU-s on 8 GPUs
    assert horizon(opts, 800.0, 8) == pytest.approx(200.0)  # and 800 GPU-s already committed
    # A long job that must go wider (at a GPU-time premium) to end with the rest pushes the
    # horizon out, to the least time by which the packed work, premium included, fits.
    long = _options(job("long", 20000.0), 8)  # 2000 s on one GPU
    h = horizon([*opts, long], 0.0, 8)
    assert h > (800 + 2000) / 8
    i = long.within(h * (1 + 1e-9))
    gpus = long.frontier.counts[i]
    assert 800 + gpus * 20000.0 / ROOT[gpus] <= 8 * h * (1 + 1e-6)
    # Exactly the least such time: a hair less and the work no longer fits.
    less = h * (1 - 1e-6)
    assert 800 + long.gpu_time(less) > 8 * less


def test_a_long_sub_linear_job_is_reserved_the_width_that_ends_it_with_the_rest():
    shorts = [job(f"s{i}", 3000.0) for i in range(12)]
    long = job("long", 40000.0)
    path = critical_path([*shorts, long], 0.0, 8, 0.1, 0.3, 1.0)
    target, reservations = path.target, path.reservations
    assert [r.job.id for r in reservations] == ["long"]
    r = reservations[0]
    assert r.gpus > 1  # one GPU would end it long after the others
    assert long.remaining_time(r.gpus) <= target
    assert long.remaining_time(r.gpus - 1) > target  # and no wider than that


def test_a_job_that_can_widen_later_for_free_is_not_critical():
    # Linear speed-up: going wide at the end costs no GPU-time, so nothing is set aside.
    shorts = [job(f"s{i}", 3000.0, LINEAR) for i in range(12)]
    long = job("long", 40000.0, LINEAR)
    assert critical_path([*shorts, long], 0.0, 8, 0.1, 0.3, 1.0).reservations == []


def test_an_urgent_job_waits_for_a_running_job_that_ends_within_its_slack():
    gpu = (Gpu("0"),)
    rigid = {1: 10.0}
    running = Job("r", 0, 2000.0, work_done=1950.0, speed=SpeedModel(rigid), gpus=("0",))
    waiting = Job("w", 1, 5000.0, speed=SpeedModel(rigid))
    # w (500 s) leaves 5 s of slack in a 505 s horizon: it is urgent, but r ends in 5 s.
    path = critical_path([running, waiting], 0.0, 1, 0.1, 0.3, 1.0)
    assert all(r.job.id != "w" for r in path.reservations)
    d = AdaptivePolicy(protect_critical=True).decide(Snapshot(gpu, (running, waiting)), 100.0)
    assert d.allocations == {"r": ("0",), "w": ()}


def test_a_short_running_job_is_not_suspended_for_a_critical_one():
    """A job of days that needs all four GPUs has no slack at all: it is urgent. The one-GPU
    job running beside it ends in minutes, well within the critical slack of the horizon, so
    it keeps its GPU and the long job waits those minutes (suspended, it would have waited
    days)."""
    gpus = tuple(Gpu(str(i)) for i in range(4))
    speed = SpeedModel({1: 100.0, 2: 190.0, 3: 275.0, 4: 360.0})
    short = Job("short", 0, 3e4, work_done=3e3, speed=speed, gpus=("0",), resize_cost=2.0)
    short = replace(short, max_gpus=1, started=True, last_change=0.0)
    huge = Job("huge", 30, 1e8, min_gpus=4, max_gpus=4, speed=speed, resize_cost=2.0)
    path = critical_path([short, huge], 0.0, 4, 0.1, 0.3, 1.0)
    assert [r.job.id for r in path.reservations] == ["huge"]  # urgent: no slack
    d = AdaptivePolicy().decide(Snapshot(gpus, (short, huge)), 60.0)
    assert d.allocations == {"short": ("0",), "huge": ()}
    assert str(d.reasons["huge"]).startswith("queued: needs 4 GPUs, 3 free")
    # Were the short job as long as a tenth of the horizon, the long one would go first.
    longer = replace(short, total_work=3e6)
    d = AdaptivePolicy().decide(Snapshot(gpus, (longer, huge)), 60.0)
    assert d.allocations["huge"] and not d.allocations["short"]


def spec(job_id, submit, work, profile=ROOT, hi=16):
    return JobSpec(job_id, submit, work, dict(profile), min_gpus=1, max_gpus=hi)


def test_adaptive_starts_the_long_job_early_and_ends_near_the_bound():
    # A burst: one long sub-linear job and many short ones. By the order alone the long job
    # starts when the short ones are done and then runs alone on many GPUs at poor
    # efficiency; on the critical path it runs from the start, as wide as it needs.
    jobs = [spec("long", 0, 60000.0)] + [spec(f"s{i:02d}", 10 + i, 4000.0) for i in range(40)]
    wl = Workload("burst", jobs)
    cfg = SimConfig(2, 4, start_cost_s=6)
    bound = lower_bounds(wl, 8, 4, 6)["makespan_s"]
    on = simulate(wl, make_policy("adaptive", protect_critical=True), sidecar(6.0), cfg)
    off = simulate(wl, make_policy("adaptive", protect_critical=False), sidecar(6.0), cfg)
    optimus = simulate(wl, make_policy("optimus"), sidecar(6.0), cfg)
    assert on.makespan_s < 0.9 * off.makespan_s
    # Optimus (everyone admitted at once, GPUs to the longest) is the makespan to match.
    assert on.makespan_s <= 1.02 * optimus.makespan_s
    assert on.makespan_s > bound  # the bound ignores the long job's premium for going wide
    first = {j["job_id"]: j["start_s"] for j in on.jobs}
    assert first["long"] == 0  # never made to wait for the short ones


def random_jobs(rng, profiles, most, holds, work, staggered=False):
    """Up to ``most`` jobs on 16 GPUs, each holding ``rng.choice(holds)`` GPUs while some are
    left, of log-normal ``work`` (mu, sigma); ``staggered``: submitted one a second, and only
    running jobs have made progress."""
    jobs, free = [], 16
    for i in range(rng.randint(1, most)):
        n = rng.choice(holds)
        gpus = tuple(f"g{free - k - 1}" for k in range(n)) if n <= free else ()
        free -= len(gpus)
        size = rng.lognormvariate(*work)
        top = rng.choice([1, 2, 4, 8, 16])
        done = size * rng.random() * 0.5 * (bool(gpus) if staggered else 1)
        jobs.append(
            Job(
                f"j{i}",
                float(i) if staggered else 0,
                size,
                max_gpus=top,
                work_done=done,
                speed=SpeedModel(rng.choice(profiles)),
                gpus=gpus,
                started=bool(gpus),
            )
        )
    return jobs


def later(jobs, dt):
    """The same jobs ``dt`` seconds on: running ones progressed at their modelled speed."""
    from dataclasses import replace

    return [
        replace(j, work_done=min(j.total_work, j.work_done + dt * j.speed.throughput(len(j.gpus))))
        if j.gpus
        else j
        for j in jobs
    ]


def test_a_path_said_to_hold_is_the_same_at_every_instant_between():
    import random

    rng = random.Random(7)
    profiles = [ROOT, LINEAR, {g: 10.0 * g**0.3 for g in range(1, 17)}]
    checked = held = 0
    for _ in range(1000):
        jobs = random_jobs(rng, profiles, 10, [0, 0, 1, 2, 4], (10, 1.5))
        ends = [j.remaining_time(len(j.gpus)) for j in jobs if j.gpus]
        dt = rng.uniform(0, min(ends, default=3600.0)) * 0.99
        args = (16, 0.1, 0.3, 1.0)
        if not holds_between((jobs, 0.0, 0), (later(jobs, dt), 0.0, 0), *args):
            continue
        held += 1
        first = critical_path(jobs, 0.0, *args).reservations
        for k in range(1, 21):
            at = critical_path(later(jobs, dt * k / 20), 0.0, *args).reservations
            assert sorted((r.job.id, r.gpus) for r in at) == sorted(
                (r.job.id, r.gpus) for r in first
            )
            checked += 1
    assert held > 200  # the check is not vacuous: most short spans do hold


def test_absurd_measurements_and_sizes_always_get_a_decision():
    # A sidecar reports what it likes: throughput from 5e-324 to 1.7e308 per second, work of
    # 1e-300 or 2^53 units. Once the horizon walk never ended on such numbers.
    import random

    from jupyter_elastic_gpu.core.policies import AdaptivePolicy

    vals = [5e-324, 1e-300, 1e-9, 1.0, 1e9, 9007199254740992.0, 1e300, 1.7e308]
    rng = random.Random(3)
    gpus = tuple(Gpu(str(i)) for i in range(8))
    for _ in range(400):
        jobs, free = [], [g.id for g in gpus]
        for i in range(rng.randint(1, 5)):
            held = tuple(free[: rng.choice([0, 1, 2])]) if rng.random() < 0.6 else ()
            free = free[len(held) :]
            measured = {len(held): rng.choice(vals)} if held else {}
            if rng.random() < 0.3:
                measured[rng.choice([1, 2, 4096])] = rng.choice(vals)
            work = rng.choice(vals)
            jobs.append(
                Job(
                    f"j{i}",
                    0.0,
                    work,
                    max_gpus=rng.choice([1, 2, 8]),
                    work_done=work * rng.random(),
                    speed=SpeedModel(measured),
                    gpus=held,
                    started=bool(held),
                    resize_cost=rng.choice([0.0, 6.0, 1e300]),
                    queued_s=rng.choice([0.0, 1e300]),
                )
            )
        policy = AdaptivePolicy(protect_critical=True)
        decision = policy.decide(Snapshot(gpus, tuple(jobs)), rng.choice([0.0, 1e12]))
        assert set(decision.allocations) == {j.id for j in jobs}


def by_the_rule(jobs, committed_gpu_s, total, critical_slack, horizon_slack, queue_slack):
    """The critical path's reservations as the module's docstring states the rule, job by job,
    with every job's options worked out: what ``critical_path``'s shortcuts must agree with."""
    from jupyter_elastic_gpu.core.policies.critical import _options

    options = [o for j in jobs if (o := _options(j, total)) is not None]
    earliest = horizon(options, committed_gpu_s, total)
    waiting = sum(o.job.min_gpus for o in options if not o.job.gpus)
    target = earliest * (1.0 + horizon_slack + queue_slack * min(1.0, waiting / total))
    line = (1.0 - critical_slack) * earliest
    idle = total - sum(len(o.job.gpus) for o in options)
    ends = sorted(
        (o.job.speed.remaining_time(o.rem, len(o.job.gpus)), len(o.job.gpus))
        for o in options
        if o.job.gpus
    )

    def freed(gpus):
        free = idle
        for end, held in [(0.0, 0), *ends]:
            free += held
            if free >= gpus:
                return end
        return float("inf")

    out = []
    for o in options:
        f = o.frontier
        chosen = o.within(target * (1 + 1e-9))
        chosen = len(f.counts) - 1 if chosen is None else chosen
        least = f.gpu_secs[f.best_from[0]]
        costly = f.gpu_secs[chosen] > least * (1.0 + critical_slack)
        free_left = o.seconds(f.fastest_cheap(critical_slack))
        wait = 0.0 if o.job.gpus else freed(o.job.min_gpus)
        urgent = free_left > line and (bool(o.job.gpus) or wait > earliest - free_left)
        if costly or urgent:
            out.append((o.job.id, f.counts[chosen], target - o.seconds(chosen)))
    return earliest, sorted(out, key=lambda r: (r[2], int(r[0][1:])))


def test_the_shortcuts_give_what_the_rule_gives_job_by_job():
    # Most jobs are settled by one product each (their cheapest, fastest or fastest cheap
    # count); the rule worked out in full for every job must give the same, to the last bit.
    import random

    rng = random.Random(11)
    profiles = [ROOT, LINEAR, {g: 10.0 * g**0.3 for g in range(1, 17)}, {1: 10.0}]
    reserved = 0
    for _ in range(600):
        jobs = random_jobs(rng, profiles, 30, [0, 0, 0, 1, 2, 4], (9, 2.0), staggered=True)
        args = (16, rng.choice([0.0, 0.1, 0.5]), rng.choice([0.0, 0.3]), rng.choice([0.0, 1.0]))
        committed = rng.choice([0.0, 0.0, 5000.0])
        path = critical_path(jobs, committed, *args)
        earliest, rule = by_the_rule(jobs, committed, *args)
        assert path.earliest == earliest
        got = [(r.job.id, r.gpus, r.slack_s) for r in path.reservations]
        assert got == rule
        # The same from the options and work left a policy has already looked up (with, ahead
        # of them, a job no count within the GPUs fits: it is not planned).
        too_wide = Job("too-wide", 0.0, 1e6, 17, 32, speed=SpeedModel({}, ROOT))
        jobs = [too_wide, *jobs]
        tops = [min(j.max_gpus, args[0]) for j in jobs]
        options = [
            j.speed.options(j.min_gpus, top, args[1]) if top >= j.min_gpus else None
            for j, top in zip(jobs, tops)
        ]
        rems = [j.remaining_work for j in jobs]
        given = critical_path(jobs, committed, *args, 0, rems, options=options)
        assert (given.earliest, given.reservations) == (path.earliest, path.reservations)
        reserved += bool(rule)
    assert 100 < reserved < 550  # both kinds of paths are common: the check is not vacuous
