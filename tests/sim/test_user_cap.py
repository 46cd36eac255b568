"""The per-user GPU cap in the simulator: the live scheduler's rule, through ``core.schedule``."""

from __future__ import annotations

import json

import pytest

from jupyter_elastic_gpu.cli import main
from jupyter_elastic_gpu.core.mechanism import Mechanism, sidecar
from jupyter_elastic_gpu.core.policies import POLICIES, make_policy
from jupyter_elastic_gpu.sim.compare import compare
from jupyter_elastic_gpu.sim.engine import SimConfig, simulate
from jupyter_elastic_gpu.sim.generate import generate_workload
from jupyter_elastic_gpu.sim.report import format_table
from jupyter_elastic_gpu.sim.workload import JobSpec, Workload

FREE = Mechanism("free", 0.0)


def linear_job(job_id, user, submit, work, lo=1, hi=4):
    return JobSpec(
        job_id,
        submit,
        work,
        {g: float(g) for g in range(1, hi + 1)},
        min_gpus=lo,
        max_gpus=hi,
        requested_gpus=lo,
        user=user,
    )


def runs(result):
    return {j["job_id"]: (j["start_s"], j["jct_s"]) for j in result.jobs}


def test_static_with_a_cap_starts_the_other_user_s_job_at_once():
    # 4 GPUs, three 2-GPU jobs of 100 s. FIFO fills the GPUs with alice's two jobs and bob waits
    # 98 s; with a cap of 2, alice's second job waits for her first and bob's starts on arrival.
    wl = Workload(
        "w",
        [
            linear_job("a1", "alice", 0, 200, 2, 2),
            linear_job("a2", "alice", 1, 200, 2, 2),
            linear_job("b1", "bob", 2, 200, 2, 2),
        ],
    )
    free = simulate(wl, make_policy("static"), FREE, SimConfig(1, 4))
    assert runs(free) == {"a1": (0, 100.0), "a2": (1, 100.0), "b1": (100.0, 198.0)}
    assert free.user_peak_gpus == {"alice": 4, "bob": 2}
    capped = simulate(wl, make_policy("static"), FREE, SimConfig(1, 4, user_gpu_cap=2))
    assert runs(capped) == {"a1": (0, 100.0), "a2": (100.0, 199.0), "b1": (2, 100.0)}
    assert capped.user_peak_gpus == {"alice": 2, "bob": 2}
    assert capped.users() == {
        "alice": {"gpu_s": 400.0, "peak_gpus": 2},
        "bob": {"gpu_s": 200.0, "peak_gpus": 2},
    }


def test_adaptive_with_a_cap_shares_and_grows_the_survivor_up_to_the_cap():
    # Two equal linear jobs: without a cap, shortest-first runs one on all 4 GPUs, then the
    # other (100 s, 200 s). With a cap of 3: alice 3 GPUs, bob the 1 left; alice ends at
    # 400/3 s; bob, 133.3 units done, grows to 3 (not 4) and ends 266.7/3 s later.
    wl = Workload("w", [linear_job("a", "alice", 0, 400), linear_job("b", "bob", 0, 400)])
    free = simulate(wl, make_policy("adaptive"), FREE, SimConfig(1, 4))
    assert runs(free) == {"a": (0, 100.0), "b": (100.0, 200.0)}
    capped = simulate(wl, make_policy("adaptive"), FREE, SimConfig(1, 4, user_gpu_cap=3))
    assert {j["job_id"]: j["start_s"] for j in capped.jobs} == {"a": 0, "b": 0}
    jct = {j["job_id"]: j["jct_s"] for j in capped.jobs}
    assert jct == pytest.approx({"a": 400 / 3, "b": 400 / 3 + 800 / 9})
    assert capped.resizes == 1  # bob's grow from 1 to 3
    # All 4 GPUs busy while both run; 3 (the cap) once bob is alone.
    assert [n for _, n in capped.timeline] == [4, 3, 0]
    assert [t for t, _ in capped.timeline] == pytest.approx([0, 400 / 3, 400 / 3 + 800 / 9])
    assert capped.user_peak_gpus == {"alice": 3, "bob": 3}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_keeps_every_user_within_the_cap(name):
    wl = generate_workload(3, jobs=40, window_s=4 * 3600, max_gpus=4, users=4)
    cfg = SimConfig(2, 4, user_gpu_cap=4)
    r = simulate(wl, make_policy(name), sidecar(6), cfg)
    assert len(r.jobs) == 40
    assert r.user_peak_gpus and max(r.user_peak_gpus.values()) <= 4
    # A cap that no user can reach changes nothing at all.
    loose = simulate(wl, make_policy(name), sidecar(6), SimConfig(2, 4, user_gpu_cap=8))
    plain = simulate(wl, make_policy(name), sidecar(6), SimConfig(2, 4))
    assert loose.jobs == plain.jobs and loose.timeline == plain.timeline


def test_the_cap_is_checked_before_running():
    with pytest.raises(ValueError, match="per-user GPU cap"):
        SimConfig(user_gpu_cap=-1)
    wl = Workload("w", [linear_job("big", "ann", 0, 100, 4, 4)])
    with pytest.raises(ValueError, match="job big needs at least 4 GPUs; the per-user cap is 2"):
        simulate(wl, make_policy("static"), FREE, SimConfig(1, 4, user_gpu_cap=2))


def test_comparison_reports_the_cap_and_gpus_per_user():
    wl = generate_workload(1, jobs=12, window_s=1800, max_gpus=4, users=3)
    comp = compare(wl, ["adaptive", "static"], SimConfig(1, 4, user_gpu_cap=2), progress=False)
    data = comp.to_json()
    assert data["cluster"]["user_gpu_cap"] == 2
    users = data["policies"]["adaptive"]["users"]
    assert all(u["peak_gpus"] <= 2 for u in users.values())
    total = sum(j["gpu_s"] for j in data["policies"]["adaptive"]["jobs"])
    assert sum(u["gpu_s"] for u in users.values()) == pytest.approx(total)
    table = format_table(comp)
    assert "at most 2 GPUs per user" in table
    assert "most GPUs at once" in table
    plain = format_table(compare(wl, ["static"], SimConfig(1, 4), progress=False))
    assert "per user" not in plain


def test_simulate_command_takes_the_cap(tmp_path, capsys):
    out = tmp_path / "wl"
    main(["workload", "generate", "--out", str(out), "--jobs", "15", "--max-gpus", "4"])
    js = tmp_path / "r.json"
    argv = ["simulate", "--jobs", str(out / "jobs.csv"), "--profiles", str(out / "profiles.csv")]
    argv += ["--nodes", "1", "--policy", "adaptive,static", "--no-progress", "--json", str(js)]
    capsys.readouterr()
    assert main([*argv, "--user-gpu-cap", "2"]) == 0
    assert "at most 2 GPUs per user" in capsys.readouterr().out
    data = json.loads(js.read_text())
    assert data["cluster"]["user_gpu_cap"] == 2
    for policy in ("adaptive", "static"):
        assert max(u["peak_gpus"] for u in data["policies"][policy]["users"].values()) <= 2
    assert main([*argv, "--user-gpu-cap", "-3"]) == 2
    assert "per-user GPU cap" in capsys.readouterr().err
