"""The simulator on GPUs of several kinds: the cluster it builds, the pace of a grant, what the
policy is told of each job's speed per kind, and the Pollux reader on per-kind measurements."""

from __future__ import annotations

import csv
import shutil

import pytest

from jupyter_elastic_gpu.core.mechanism import Mechanism
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.sim.data import pollux_traces, trace_data
from jupyter_elastic_gpu.sim.engine import SimConfig, Simulation, simulate
from jupyter_elastic_gpu.sim.simjob import SimJob, kind_speeds
from jupyter_elastic_gpu.sim.traces.pollux import read_pollux
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload

KINDS = (("slow", 1, 4), ("fast", 1, 2))


def per_kind(job_id, submit, work, speeds, hi=2, lo=1):
    """A job whose throughput on each kind is ``speeds[kind]`` per GPU (linear in the count),
    profiled on one GPU of each kind."""
    kind_speed = {k: (lambda p, s=s: s * sum(p)) for k, s in speeds.items()}
    first = next(iter(speeds.values()))
    return JobSpec(
        job_id,
        submit,
        work,
        {g: first * g for g in range(1, hi + 1)},
        min_gpus=lo,
        max_gpus=hi,
        requested_gpus=lo,
        kind_speed=kind_speed,
        kind_prior=dict(speeds),
    )


def test_a_mixed_cluster_is_its_kinds_nodes_and_bad_ones_are_refused():
    cfg = SimConfig(kinds=(("T4", 2, 4), ("A100", 1, 8)))
    gpus = cfg.gpus()
    assert cfg.total_gpus == 16 and cfg.node_size == 8 and cfg.mixed
    assert [g.kind for g in gpus] == ["T4"] * 8 + ["A100"] * 8
    assert len({g.node for g in gpus}) == 3
    assert cfg.layout() == "2 x 4 T4, 1 x 8 A100"
    assert SimConfig(nodes=2, gpus_per_node=4).layout() == "2 x 4 GPUs"
    for bad, says in (
        ((("T4", 0, 4),), "one node or more"),
        ((("", 1, 4),), "needs a name"),
        ((("T4", 1, 4), ("T4", 1, 8)), "named twice"),
    ):
        with pytest.raises(ValueError, match=says):
            SimConfig(kinds=bad)


def test_a_grant_over_two_kinds_goes_at_the_slower_kinds_pace():
    job = per_kind("j", 0.0, 100.0, {"slow": 1.0, "fast": 4.0}, hi=6)
    sim = Simulation(Workload("w", [job]), make_policy("static"), Mechanism("sidecar", 0.0),
                     SimConfig(kinds=KINDS))  # fmt: skip
    simjob = sim.jobs[0]
    sim._apply(simjob, ("n1-g0", "n1-g1"))  # both fast
    assert simjob.kind == "fast" and simjob.speed == pytest.approx(8.0)
    sim._apply(simjob, ("n0-g0", "n1-g0", "n1-g1"))  # one slow one among them
    assert simjob.kind == "slow" and simjob.speed == pytest.approx(3.0)


def test_the_policy_is_told_the_profile_then_what_each_job_measured_on_each_kind():
    jobs = [
        per_kind("gains", 0.0, 400.0, {"slow": 1.0, "fast": 6.0}),
        per_kind("alike", 0.0, 400.0, {"slow": 1.0, "fast": 1.1}),
    ]
    cfg = SimConfig(kinds=KINDS)
    before = kind_speeds([SimJob(j) for j in jobs], cfg)
    assert before["gains"]["fast"] / before["gains"]["slow"] == pytest.approx(6.0)
    measured = SimJob(jobs[0], by_kind={"slow": {1: 2.0}, "fast": {1: 20.0}})
    assert kind_speeds([measured], cfg)["gains"]["fast"] == pytest.approx(10.0)  # not 6
    sim = Simulation(Workload("w", jobs), make_policy("adaptive"), Mechanism("sidecar", 0.0), cfg)
    result = sim.run()
    # The fast kind (2 GPUs) goes to the job that gains six times from it, not to the one
    # that gains a tenth, whatever their order.
    ran = {j.spec.job_id: j for j in sim.jobs}
    assert ran["gains"].kind == "fast" and ran["alike"].kind == "slow"
    jct = {j["job_id"]: j["jct_s"] for j in result.jobs}
    assert jct["gains"] == pytest.approx(400.0 / 12.0) and jct["alike"] == pytest.approx(
        200.0
    )  # on 2 slow GPUs


def test_a_job_on_the_slow_kind_moves_when_the_fast_kind_frees_up():
    # "first" takes the fast kind; "later" must start on the slow one, then moves to the fast
    # kind once "first" is done (it is six times as fast there: worth a restart).
    jobs = [
        per_kind("first", 0.0, 120.0, {"slow": 1.0, "fast": 6.0}),
        per_kind("later", 1.0, 6000.0, {"slow": 1.0, "fast": 6.0}),
    ]
    result = simulate(Workload("w", jobs), make_policy("adaptive"), Mechanism("sidecar", 5.0),
                      SimConfig(kinds=KINDS))  # fmt: skip
    later = next(j for j in result.jobs if j["job_id"] == "later")
    assert later["resizes"] >= 1
    # 2 slow GPUs for ~10 s, then 2 fast ones: well under its time on the slow kind alone
    assert later["jct_s"] < 6000.0 / 4.0


def _scaled_copy(source, target, factor):
    target.mkdir()
    for entry in source.iterdir():
        if entry.name not in ("placements.csv", "scalability.csv"):
            shutil.copy(entry, target / entry.name)
            continue
        with open(entry, newline="") as f:
            rows = list(csv.DictReader(f))
        with open(target / entry.name, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=list(rows[0]))
            out.writeheader()
            for row in rows:
                out.writerow(row | {c: float(row[c]) * factor for c in ("step_time", "sync_time")})


def test_the_pollux_reader_takes_measurements_per_kind(tmp_path):
    shipped = pollux_traces(trace_data())
    (tmp_path / "T4").mkdir()
    _scaled_copy(shipped / "cifar10", tmp_path / "T4" / "cifar10", 1.0)
    (tmp_path / "A100").mkdir()
    _scaled_copy(shipped / "cifar10", tmp_path / "A100" / "cifar10", 0.25)
    workload = tmp_path / "w.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\nc,0,cifar10,2,256\n")
    folders = {"T4": str(tmp_path / "T4"), "A100": str(tmp_path / "A100")}
    [job] = read_pollux(str(workload), folders, 4, 16).jobs
    [plain] = read_pollux(str(workload), folders["T4"], 4, 16).jobs
    assert job.work == plain.work and job.profile == plain.profile  # the first kind's
    assert job.kind_prior["A100"] == pytest.approx(4 * job.kind_prior["T4"], rel=0.01)
    assert job.true_throughput((2,), "T4") == pytest.approx(plain.true_throughput((2,)))
    assert job.true_throughput((2,)) == job.true_throughput((2,), "A100")  # bounds: fastest
    assert job.pace({"T4", "A100"}) == "T4"
    with pytest.raises(ValueError, match="no application traces"):
        read_pollux(str(workload), {}, 4, 16)
    (tmp_path / "empty").mkdir()
    _scaled_copy(shipped / "cifar10", tmp_path / "empty" / "other", 1.0)
    with pytest.raises(
        ValueError, match=r"no traces for application 'cifar10' in .* \(kind V100\)"
    ):
        read_pollux(str(workload), {"T4": folders["T4"], "V100": str(tmp_path / "empty")}, 4, 16)
