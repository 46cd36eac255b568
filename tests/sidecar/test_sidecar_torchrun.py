"""End to end: an unmodified torchrun script, real DDP over gloo on simulated GPUs, resized.

The script resumes itself from its own checkpoint; the proofs are its own record of the steps
it trained (each step once, but for those after its last checkpoint, trained again, which must
be exactly the steps the sidecar reports lost), and the ranks the trainer reported.
"""

from __future__ import annotations

import itertools
import re

import pytest
from elastic_gpu_sidecar import protocol as P
from needs import module
from sidecar_helpers import progress, run_resized, status

module("torch", "pip install -e '.[torch]'")

pytestmark = pytest.mark.slow

SCRIPT = "torchrun_ddp.py"
PLAN = [("0,1", None), ("0,1,2,3", 30), ("0", 30)]


def segments(out):
    """The script's steps, cut where its world size changed: [(world, [steps...])]."""
    rows = [
        tuple(map(int, line.split()))
        for line in (out / "steps.txt").read_text().split("\n")
        if line
    ]
    return [
        (world, [s for s, _ in group])
        for world, group in itertools.groupby(rows, key=lambda r: r[1])
    ]


def check_run(job, out, code, err, total):
    assert code == P.EXIT_DONE, err
    recs = progress(job)
    by_gen = {}
    for r in recs:
        by_gen.setdefault(r["generation"], set()).add(r["replicas"])
    assert by_gen == {1: {2}, 2: {4}, 3: {1}}
    firsts = [r for r in recs if r.get("first")]
    assert [r["generation"] for r in firsts] == [1, 2, 3]
    st = status(job)
    assert st["state"] == "done" and st["restarts"] == 0
    lost = [r["lost_steps"] for r in st["resizes"]]
    assert len(lost) == 2 and all(isinstance(n, int) for n in lost)
    # each generation trained on from where the script resumed, which is where the adapter
    # says it resumed; what the previous one trained after that is what the sidecar lost
    segs = segments(out)
    assert [w for w, _ in segs] == [2, 4, 1]
    for (_, steps), first in zip(segs, firsts, strict=True):
        assert steps == list(range(first["resumed_from"] + 1, steps[-1] + 1))
    for k in (1, 2):
        assert segs[k - 1][1][-1] - firsts[k]["resumed_from"] == lost[k - 1]
    assert segs[-1][1][-1] == total == recs[-1]["global_step"]
    log = (job / "sidecar.log").read_text()
    assert [int(n) for n in re.findall(r"lost (\d+) steps", log)] == lost
    return lost


def test_resized_twice_resumes_from_its_own_checkpoint(tmp_path):
    job, out = tmp_path / "job", tmp_path / "out"
    out.mkdir()
    total = 2000
    code, err = run_resized(job, SCRIPT, [str(out), "--total", str(total)], plan=PLAN)
    lost = check_run(job, out, code, err, total)
    assert lost == [0, 0]  # the script saved at the step the stop came
    log = (job / "trainer.log").read_text()
    assert "SIGTERM to the script after step" in log
    assert "keep-global not applied: a torchrun script's batch is its own" in log
    assert {r["batch_size"] for r in progress(job) if r["generation"] == 2} == {32}


def test_steps_since_the_scripts_last_checkpoint_are_the_lost_ones(tmp_path):
    # the script saves every 25 steps and exits on SIGTERM without saving: what it trained
    # since its last save is trained again, and the sidecar counts exactly those as lost
    job, out = tmp_path / "job", tmp_path / "out"
    out.mkdir()
    total = 2000
    script_args = [str(out), "--total", str(total), "--save-every", "25", "--no-save-on-term"]
    code, err = run_resized(job, SCRIPT, script_args, plan=PLAN)
    lost = check_run(job, out, code, err, total)
    saves = [r["resumed_from"] for r in progress(job) if r.get("first")]
    assert all(s % 25 == 0 for s in saves)
    log = (job / "trainer.log").read_text()
    stops = re.findall(r"last checkpoint is at step (\d+): the (\d+) steps since are lost", log)
    assert [int(n) for _, n in stops] == [n for n in lost if n]


def test_a_plain_loop_runs_as_one_process_whatever_the_grant(tmp_path):
    job, out = tmp_path / "job", tmp_path / "out"
    out.mkdir()
    plan = [("0,1", None), ("0", 30)]
    code, err = run_resized(job, "torchrun_plain.py", [str(out), "--total", "3000"], plan=plan)
    assert code == P.EXIT_DONE, err
    recs = progress(job)
    assert {r["replicas"] for r in recs} == {1}
    assert {r["batch_size"] for r in recs} == {16}
    firsts = [r for r in recs if r.get("first")]
    assert [r["generation"] for r in firsts] == [1, 2]
    steps = [int(line.split()[0]) for line in (out / "steps.txt").read_text().split()[::2]]
    assert steps == list(range(1, 3001))  # saved at the stop: no step lost or repeated
    assert [r["lost_steps"] for r in status(job)["resizes"]] == [0]
    assert (
        "the script starts no process group (a plain training loop)"
        in (job / "trainer.log").read_text()
    )
