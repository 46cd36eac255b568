"""End to end: a resized torchrun job's next ranks are standby ranks with torch imported.

The sidecar's standby leader keeps as many standby ranks ready as the running grant has
devices; on the resize the ranks of the new generation are those processes (started, and
done importing, before the resize was asked for), the extras are ended, no step is lost and
no process is left after the job. Standby ranks not needed, or whose leader lets go of them,
end.
"""

from __future__ import annotations

import json
import re

import pytest
from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.trainer import rankstandby
from needs import module
from sidecar_helpers import SCRIPTS, cli, finish, progress, start, status, wait_for
from test_ranks import processes_of
from test_sidecar_torchrun import segments

module("torch", "pip install -e '.[torch]'")

pytestmark = pytest.mark.slow

READY = re.compile(r"standby rank (\d+) ready \(framework imported")


def standby_ranks_ready(job, generation: int) -> list[int]:
    """Pids of the standby ranks that said they were ready after generation's marker."""
    path = job / P.TRAINER_LOG
    log = path.read_text() if path.exists() else ""
    part = log.split(f"===== generation {generation} ")[-1] if generation > 1 else log
    part = part.split(f"===== generation {generation + 1} ")[0]
    return [int(pid) for pid in READY.findall(part)]


def ranks_of(out, world: int, after: int = 0) -> dict[int, int]:
    """{rank: pid} of the ranks that started with ``world`` (after the first ``after`` lines)."""
    rows = [line.split() for line in (out / "ranks.txt").read_text().splitlines()][after:]
    return {int(r): int(pid) for pid, r, w in rows if int(w) == world}


def resize_when_ready(job, proc, generation: int, want: int, gpus: str) -> list[int]:
    wait_for(
        lambda: any(r["generation"] == generation and r.get("first") for r in progress(job)),
        timeout=120,
        proc=proc,
        what=f"the first step of generation {generation}",
    )
    ready = wait_for(
        lambda: (pids := standby_ranks_ready(job, generation)) and len(pids) >= want and pids,
        timeout=120,
        proc=proc,
        what=f"{want} standby ranks",
    )
    assert cli("resize", "--job-dir", str(job), "--gpus", gpus).returncode == 0
    wait_for(
        lambda: any(r["generation"] == generation + 1 and r.get("first") for r in progress(job)),
        timeout=120,
        proc=proc,
        what=f"the first step of generation {generation + 1}",
    )
    return ready


def start_endless(tmp_path):
    """(job dir, the script's output dir, sidecar) of a torchrun job on 2 GPUs that trains
    until it is stopped."""
    job, out = tmp_path / "job", tmp_path / "out"
    out.mkdir()
    script = str(SCRIPTS / "torchrun_ddp.py")
    proc = start(
        job, "--gpus", "0,1", "--simulated", "--", script, str(out), "--total", "1000000000"
    )
    return job, out, proc


def test_the_ranks_after_a_resize_are_standby_ranks_with_torch_imported(tmp_path):
    job, out, proc = start_endless(tmp_path)
    try:
        ready2 = resize_when_ready(job, proc, 1, 2, "1,2")  # 2 -> 2 on other devices
        gen2 = ranks_of(out, 2, after=2)
        ready3 = resize_when_ready(job, proc, 2, 2, "0")  # 2 -> 1: one standby is not needed
        gen3 = ranks_of(out, 1)
    finally:
        cli("cancel", "--job-dir", str(job))
        code, _, err = finish(proc)
    assert code == P.EXIT_CANCELLED, err
    assert len(ready2) == 2 and sorted(gen2.values()) == sorted(ready2)
    assert len(ready3) == 2 and gen3[0] in ready3
    log = (job / P.TRAINER_LOG).read_text()
    assert "2 from standby ranks" in log and "1 from standby ranks" in log
    assert "ending 1 standby rank(s) not needed" in log
    # the resizes lost no step (the script saves when it is stopped) nor repeated one
    st = status(job)
    assert [r["lost_steps"] for r in st["resizes"]] == [0, 0]
    segs = segments(out)
    assert [w for w, _ in segs] == [2, 1]  # (generations 1 and 2 both on 2)
    steps = [s for _, part in segs for s in part]
    assert steps == list(range(1, len(steps) + 1))
    assert [r["generation"] for r in progress(job) if r.get("first")] == [1, 2, 3]
    assert processes_of(job) == []


@pytest.fixture
def standby_env(tmp_path, monkeypatch):
    """This process as a standby leader of a torchrun job."""
    job = tmp_path / "job"
    job.mkdir()
    (job / P.JOB).write_text(json.dumps({"framework": "torchrun", "script": "x.py"}))
    monkeypatch.setenv(P.ENV_JOB_DIR, str(job))
    yield job
    rankstandby.drop()


def test_standby_ranks_not_needed_are_ended(standby_env):
    rankstandby.start(2)
    procs = list(rankstandby._ready.values())
    rankstandby.drop()
    assert all(p.returncode is not None for p in procs) and rankstandby._ready == {}
    assert rankstandby.take(0, {}) is None


def test_a_standby_rank_whose_leader_lets_go_exits_by_itself(standby_env):
    rankstandby.start(1)
    proc = rankstandby._ready.pop(0)
    proc.stdin.close()  # as when its leader exits
    assert proc.wait(timeout=120) == 0


def test_standby_ranks_die_with_the_sidecar(tmp_path):
    job, _, proc = start_endless(tmp_path)
    try:
        wait_for(
            lambda: len(standby_ranks_ready(job, 1)) == 2, timeout=120, proc=proc, what="standbys"
        )
        assert len(processes_of(job)) == 6  # leader, 2 ranks, standby leader, 2 standby ranks
    finally:
        proc.kill()  # the sidecar alone: the rest must die with it
        proc.wait()
    wait_for(lambda: processes_of(job) == [], timeout=30, what="every process of the job to end")
