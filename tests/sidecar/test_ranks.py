"""The leader and its ranks (``trainer/ranks.py``) with real torch DDP over gloo.

One code for the group, from the rank that failed first: a rank's own error is the job's
error (65, not retried) even though the other ranks fail after it in their next collective;
a rank the machine killed is an infrastructure failure (70, retried); no rank outlives the
group, nor its leader.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.trainer.ranks import combined_exit, reserve_port
from needs import module
from sidecar_helpers import (
    ENV,
    SCRIPTS,
    children,
    finish,
    progress,
    start,
    status,
    trainer_pids_alive,
    wait_for,
)

module("torch", "pip install -e '.[torch]'")

KILLED = -signal.SIGKILL


def test_the_rendezvous_port_is_held_for_rank_0_alone():
    """The leader's port is never free between its pick and rank 0's bind (CI once lost a
    torchrun test to EADDRINUSE there): an ordinary bind to it fails, rank 0's store listens
    on it and its peers reach that store."""
    from torch.distributed import TCPStore

    held = reserve_port()
    port = held.getsockname()[1]
    other = socket.socket()
    with pytest.raises(OSError) as refused:
        other.bind(("127.0.0.1", port))
    assert refused.value.errno == errno.EADDRINUSE
    other.close()
    timeout = dt.timedelta(seconds=30)
    for libuv in (True, False):  # both of torch's store servers
        store = TCPStore(
            "127.0.0.1", port, 2, True, timeout, use_libuv=libuv, wait_for_workers=False
        )
        peer = TCPStore("127.0.0.1", port, 2, False, timeout, use_libuv=libuv)
        peer.set("rank1", "here")
        assert store.get("rank1") == b"here"
        del peer, store
    held.close()


def test_the_first_rank_to_fail_decides():
    done, stopped, user, infra = P.TRAINER_DONE, P.TRAINER_STOPPED, 65, 70
    assert combined_exit({0: done, 1: done}, False) == done
    # the others fail in the collective the first one left: consequences, not causes
    assert combined_exit({1: user, 0: infra}, False) == user
    assert combined_exit({1: KILLED, 0: user}, False) == infra
    assert combined_exit({0: done, 1: infra, 2: user}, False) == infra
    # a stop: every rank stopped, or others killed or failing after one stopped
    assert combined_exit({0: stopped, 1: stopped}, True) == stopped
    assert combined_exit({1: stopped, 0: user, 2: KILLED}, True) == stopped
    assert combined_exit({0: -signal.SIGUSR1, 1: stopped}, True) == stopped
    assert combined_exit({0: stopped, 1: stopped}, False) == infra  # nobody asked


def processes_of(job: Path) -> list[int]:
    """Pids of the processes running for ``job`` (the trainer's environment names it)."""
    needle = f"{P.ENV_JOB_DIR}={job}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                env = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if needle in env:
                found.append(int(entry.name))
    return trainer_pids_alive(found)


def run_failing(tmp_path, how: str) -> tuple[Path, dict]:
    job = tmp_path / "job"
    script = str(SCRIPTS / "torchrun_fail.py")
    proc = start(
        job, "--gpus", "0,1", "--simulated", "--max-restarts", "0", "--", script, how, "1", "5"
    )
    code, _, err = finish(proc, timeout=120)
    assert code == P.EXIT_FAILED, err
    assert processes_of(job) == []
    st = status(job)
    assert st["state"] == "failed"
    return job, st


@pytest.mark.slow
def test_a_rank_that_raises_fails_the_job_with_its_error(tmp_path):
    job, st = run_failing(tmp_path, "raise")
    assert "trainer" in (job / "sidecar.log").read_text()
    error = json.loads((job / P.TRAINER_ERROR).read_text())
    assert error["type"] == "ValueError" and error["kind"] == "user" and error["rank"] == 1
    assert error["message"] == "rank 1 cannot go on at step 5"
    assert st["restarts"] == 0  # a script error is not retried
    assert "exit code 65" in (job / "sidecar.log").read_text()


@pytest.mark.slow
def test_a_killed_rank_is_an_infrastructure_failure(tmp_path):
    job, _ = run_failing(tmp_path, "kill")
    error = json.loads((job / P.TRAINER_ERROR).read_text())
    assert error["kind"] == "infrastructure" and error["rank"] == 1
    assert "rank 1 of 2 ended without a reason (killed by SIGKILL)" in error["message"]
    log = (job / "sidecar.log").read_text()
    assert "exit code 70" in log and "giving up" in log  # retried, up to --max-restarts 0


def start_trainer(
    tmp_path, *script_args: str, script="torchrun_ddp.py", **config
) -> tuple[Path, subprocess.Popen]:
    """The trainer alone, as the sidecar starts it, on two simulated GPUs; the script's first
    argument is a directory of its own (but for ``torchrun_fail.py``)."""
    job, out = tmp_path / "job", tmp_path / "out"
    job.mkdir()
    out.mkdir()
    if script == "torchrun_ddp.py":
        script_args = (str(out), *script_args)
    config = dict(
        config, script=str(SCRIPTS / script), args=list(script_args), framework="torchrun"
    )
    (job / P.JOB).write_text(json.dumps(config))
    env = dict(
        ENV,
        **{
            P.ENV_JOB_DIR: str(job),
            P.ENV_GENERATION: "1",
            P.ENV_GPUS: "0,1",
            P.ENV_SIMULATED: "1",
            "CUDA_VISIBLE_DEVICES": "",
        },
    )
    env.pop(P.ENV_SIDECAR_PID, None)
    with open(job / P.TRAINER_LOG, "ab") as log:
        leader = subprocess.Popen(
            [sys.executable, "-m", "elastic_gpu_sidecar.trainer"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return job, leader


def first_step(job: Path, leader: subprocess.Popen) -> None:
    wait_for(
        lambda: any(r.get("first") for r in progress(job)) or leader.poll() is not None,
        timeout=120,
        what="the first step",
    )
    assert leader.poll() is None, (job / P.TRAINER_LOG).read_text()


def stopped(job: Path, leader: subprocess.Popen) -> str:
    """Ask the trainer to stop as the sidecar does; its log once it exited 75."""
    os.kill(leader.pid, signal.SIGUSR1)
    try:
        code = leader.wait(timeout=60)
    finally:
        for pid in processes_of(job):
            os.kill(pid, signal.SIGKILL)
    log = (job / P.TRAINER_LOG).read_text()
    assert code == P.TRAINER_STOPPED, log
    assert processes_of(job) == []
    return log


LONG = ("--total", "1000000")


@pytest.mark.slow
def test_a_stop_before_the_first_step_ends_every_rank_at_once(tmp_path):
    job, leader = start_trainer(tmp_path, *LONG)
    wait_for(lambda: len(children(leader.pid)) == 2, timeout=30, what="the ranks")
    stopped(job, leader)
    assert not any(r.get("first") for r in progress(job))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("on_term", "said"),
    [
        ("ignore", "the script did not exit within 1 s of SIGTERM"),
        ("default", "the script has no SIGTERM handler: ended after step"),
    ],
)
def test_a_script_that_does_not_stop_on_sigterm_is_stopped(tmp_path, on_term, said):
    job, leader = start_trainer(tmp_path, *LONG, "--on-term", on_term, stop_grace_s=1)
    first_step(job, leader)
    log = stopped(job, leader)
    assert said in log
    # it saves no checkpoint: what it trained is lost, and said so
    assert re.search(
        r"stopped at step (\d+) .* the script saved no checkpoint yet: its \1 steps", log
    )
    assert progress(job)[-1]["stopped"] is True


@pytest.mark.slow
def test_a_script_without_a_checkpoint_of_its_own_loses_its_work_and_says_so(tmp_path):
    job, leader = start_trainer(tmp_path, "raise", "-1", "0", script="torchrun_fail.py")
    first_step(job, leader)
    log = stopped(job, leader)
    assert "the script saves and loads no checkpoint of its own" in log
    assert re.search(r"stopped at step (\d+) .* no checkpoint of its own: its \1 steps since", log)


@pytest.mark.slow
def test_ranks_die_with_their_leader(tmp_path):
    job, leader = start_trainer(tmp_path, *LONG)
    try:
        first_step(job, leader)
        ranks = children(leader.pid)
        assert len(ranks) == 2
        os.kill(leader.pid, signal.SIGKILL)  # the leader alone, not its process group
        leader.wait()
        wait_for(lambda: not trainer_pids_alive(ranks), timeout=30, what="the ranks' end")
    finally:
        for pid in processes_of(job):
            os.kill(pid, signal.SIGKILL)
