"""No holder keeps GPUs against the scheduler: every release it is asked for has a deadline.

The attacks, on a real Jupyter server with the embedded scheduler and real sidecars: a sidecar
(here: the real one, frozen with SIGSTOP, as a trainer hung in a checkpoint is) whose secret a
hostile process reads from its environment and uses to keep reporting its first grant; a
cancel of a job whose sidecar never answers; and the same on a shared scheduler, whose user's
own server must end the processes (the scheduler starts none), or, with that server gone, the
sidecar itself once its secret is refused. Before the deadlines, the job waiting for the GPUs
stayed ``starting`` and the cancelled job ``stopping``, for good.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
from pathlib import Path

import pytest
from servers import (
    HolderBeats,
    call,
    free_port,
    freeze_sidecar,
    get_json,
    is_running,
    process_tree,
    sidecar_of,
    wait_for,
)

from jupyter_elastic_gpu.scheduler.execution.launcher import kill_tree
from jupyter_elastic_gpu.scheduler.releases import RELEASE_TIMEOUT

pytestmark = pytest.mark.slow

GRACE_S = 3.0
#: Long enough for a loaded 2-core machine; the deadline itself is GRACE_S.
WAIT_S = 90.0
CONFIG = {"SchedulerService.release_grace": GRACE_S}


def synthetic(name: str, min_gpus: int, max_gpus: int, work: float) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190, "3": 270, "4": 350}},
    }


class HostileHolder(HolderBeats):
    """Heartbeats as ``job_id``'s sidecar with the secret from its environment, reporting its
    first grant for ever."""

    def __init__(self, url: str, secret: str, job_id: str, generation: int, gpus: list[str]):
        super().__init__(url, secret)
        self.claim = {"job_id": job_id, "generation": generation, "gpus": gpus, "state": "running"}

    def body(self) -> dict:
        return self.claim


def job(api: str, token: str, job_id: str) -> dict:
    return get_json(f"{api}jobs/{job_id}", token)


def events(api: str, token: str, job_id: str) -> list[dict]:
    return get_json(f"{api}jobs/{job_id}/events", token)["events"]


def test_a_holder_that_keeps_reporting_its_first_grant_loses_it(server_process):
    me = getpass.getuser()
    server = server_process(port=free_port(), config={**CONFIG, "admin_users": me})
    api, token = server.api_url, server.token
    _, a = call("POST", api + "jobs", token, synthetic("greedy", 1, 4, 1e9))
    wait_for(
        lambda: (j := job(api, token, a["id"]))["state"] == "running" and len(j["gpus"]) == 4,
        WAIT_S,
        what="the elastic job on all four GPUs",
    )
    _, frozen, env, argv = freeze_sidecar(a["id"])
    url = argv[argv.index("--scheduler-url") + 1]
    first = job(api, token, a["id"])
    secret = env["ELASTIC_GPU_JOB_SECRET"]
    with HostileHolder(url, secret, a["id"], first["generation"], first["gpus"]) as holder:
        wait_for(lambda: 200 in holder.statuses, 30, what="the holder's first heartbeat")
        # GPU 3 goes out of service: the job is asked to move off it (a resize to 3 GPUs),
        # and a job that needs two GPUs waits for them.
        code, _ = call("POST", f"{api}gpus/3/drain", token, {"drained": True})
        assert code == 200
        _, b = call("POST", api + "jobs", token, synthetic("short", 2, 2, 2000))
        done = wait_for(
            lambda: (j := job(api, token, a["id"]))["state"] in ("failed", "cancelled") and j,
            WAIT_S,
            what="the greedy job's claim to be voided",
        )
        assert done["state"] == "failed"
        assert done["error"]["type"] == RELEASE_TIMEOUT
        assert "resize to 3 GPUs" in done["error"]["message"]
        wait_for(lambda: holder.statuses[-1] == 401, 30, what="its secret to be refused")
    # Its processes were ended by the launcher (SIGKILL reaches a stopped process too).
    wait_for(lambda: not any(is_running(p) for p in frozen), 30, what="its processes to end")
    log = events(api, token, a["id"])
    deadline = [e for e in log if e["kind"] == "deadline"]
    assert deadline and deadline[0]["data"]["grace_s"] == GRACE_S
    assert deadline[0]["data"]["gpus"] == ["3"]
    failed = next(e for e in log if e["kind"] == "failed")
    resized = next(e for e in log if e["kind"] == "resize")
    assert failed["t"] - deadline[0]["t"] >= GRACE_S
    # For docs/security.md (pytest -s): from the ask to the void, against the grace period.
    print(f"voided {failed['t'] - resized['t']:.1f} s after the ask (grace {GRACE_S:g} s)")
    wait_for(
        lambda: job(api, token, b["id"])["state"] in ("running", "done"),
        WAIT_S,
        what="the job that waited for the GPUs to start",
    )


def test_a_cancel_ends_a_sidecar_that_never_stops(server_process):
    server = server_process(port=free_port(), config=CONFIG)
    api, token = server.api_url, server.token
    jobs = [call("POST", api + "jobs", token, synthetic(n, 2, 2, 1e9))[1] for n in ("a", "b")]
    for j in jobs:
        wait_for(
            lambda j=j: job(api, token, j["id"])["state"] == "running",
            WAIT_S,
            what=f"{j['name']} running",
        )
    hung, forced = jobs
    _, frozen_hung, _, _ = freeze_sidecar(hung["id"])
    _, frozen_forced, _, _ = freeze_sidecar(forced["id"])
    try:
        # An ordinary cancel waits for the checkpoint, at most the grace period.
        code, answer = call("POST", f"{api}jobs/{hung['id']}/cancel", token, {})
        assert (code, answer["state"]) == (202, "stopping")
        # A forced one ends it at once (and a bad body changes nothing).
        code, _ = call("POST", f"{api}jobs/{forced['id']}/cancel", token, {"force": "yes"})
        assert code == 400 and job(api, token, forced["id"])["state"] == "running"
        code, answer = call("POST", f"{api}jobs/{forced['id']}/cancel", token, {"force": True})
        assert (code, answer["state"]) == (202, "cancelled")
        assert "ended at once by" in answer["reason"]
        wait_for(
            lambda: not any(is_running(p) for p in frozen_forced),
            30,
            what="the forced job's processes to end",
        )
        ended = wait_for(
            lambda: (j := job(api, token, hung["id"]))["state"] != "stopping" and j,
            WAIT_S,
            what="the hung job's cancel to be carried out",
        )
        assert ended["state"] == "cancelled"
        assert "did not stop (cancel) within 3 s" in ended["reason"]
        wait_for(
            lambda: not any(is_running(p) for p in frozen_hung),
            30,
            what="the hung job's processes to end",
        )
    finally:
        for p in frozen_hung + frozen_forced:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


def test_the_owners_server_ends_what_the_shared_scheduler_voided(daemon, user_server):
    d, tokens = daemon
    server = user_server("alice")
    api, token = server.api_url, server.token
    _, a = call("POST", api + "jobs", token, synthetic("hung", 2, 2, 1e9))
    wait_for(lambda: job(api, token, a["id"])["state"] == "running", WAIT_S, what="running")
    _, frozen, _, _ = freeze_sidecar(a["id"])
    try:
        # The admin's forced cancel at the shared scheduler: it voids the claim at once, and
        # alice's own server (which started the sidecar, as alice) ends its processes.
        code, answer = call(
            "POST", f"{d.api_url}jobs/{a['id']}/cancel", tokens["ops"], {"force": True}
        )
        assert (code, answer["state"]) == (202, "cancelled")
        assert "ended at once by ops" in answer["reason"]
        wait_for(
            lambda: not any(is_running(p) for p in frozen),
            WAIT_S,
            what="alice's server to end the processes",
        )
    finally:
        for p in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


def test_a_voided_sidecar_whose_server_is_gone_ends_itself(daemon, user_server):
    """Nobody is left to end the processes of a voided claim (the owner's server that started
    them is gone: sidecars outlive it on purpose): the sidecar ends its trainer itself once
    the scheduler refuses the secret it had accepted, and writes nothing more to the job dir."""
    d, tokens = daemon
    server = user_server("alice")
    api, token = server.api_url, server.token
    _, a = call("POST", api + "jobs", token, synthetic("orphan", 2, 2, 1e9))
    running = wait_for(
        lambda: (j := job(api, token, a["id"]))["state"] == "running" and j, WAIT_S, what="running"
    )
    job_dir = Path(running["job_dir"])
    pid = sidecar_of(a["id"])[0]  # (it is running: its sidecar has answered)
    tree = wait_for(lambda: t if len(t := process_tree(pid)) > 1 else None, 30, what="trainer")
    server.stop()
    status = (job_dir / "status.json").read_bytes()
    assert all(is_running(p) for p in tree), "the job did not outlive its server"
    code, answer = call("POST", f"{d.api_url}jobs/{a['id']}/cancel", tokens["ops"], {"force": True})
    assert (code, answer["state"]) == (202, "cancelled")
    wait_for(lambda: not any(is_running(p) for p in tree), WAIT_S, what="the sidecar to end itself")
    log = (job_dir / "sidecar.log").read_text()
    assert "its claim on the GPUs is void" in log and "killing the trainer" in log
    assert (job_dir / "status.json").read_bytes() == status
    assert not (job_dir / "result.json").exists()


def test_kill_tree_ends_a_stopped_tree_and_its_groups(tmp_path):
    """What the local launcher does at a deadline: the whole tree, stopped or not."""
    import subprocess
    import sys

    script = (
        "import os, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
        " start_new_session=True)\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout.readline().strip() == b"ready"
    members = wait_for(
        lambda: process_tree(proc.pid) if len(process_tree(proc.pid)) == 2 else None,
        30,
        what="the child",
    )
    for p in members:
        os.kill(p, signal.SIGSTOP)
    kill_tree(proc.pid)
    proc.wait(timeout=30)
    wait_for(lambda: not any(is_running(p) for p in members), 30, what="the tree to end")
