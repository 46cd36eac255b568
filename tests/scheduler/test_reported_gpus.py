"""A sidecar's word on its GPUs is believed only within what its job was granted.

The attack: a 1-GPU job whose heartbeat claims every GPU keeps every other job from
launching (``busy_elsewhere`` counts what sidecars report), while ``status`` shows those GPUs
free. What a heartbeat reports is clipped to the grant of the generation it reports and to
the inventory; in the middle of a resize, a sidecar still holds its older generation's GPUs
until it reports the new one.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.protocol import Grant, JobState
from servers import call, free_port, get_json, recording_service, synthetic, wait_for

from jupyter_elastic_gpu.models import Heartbeat, SubmitRequest, parse
from jupyter_elastic_gpu.scheduler import grants
from jupyter_elastic_gpu.scheduler.jobs import JobRecord, hash_secret
from jupyter_elastic_gpu.scheduler.principal import Principal

ANN = Principal("ann")


async def test_a_heartbeat_claiming_every_gpu_keeps_only_the_jobs_own(tmp_path):
    async with recording_service(tmp_path) as (svc, launcher):
        a = await svc.submit(ANN, parse(SubmitRequest, synthetic(1, 1), "job"))
        await svc.step()
        assert a.id in launcher.secrets and len(a.desired.gpus) == 1
        mine = a.desired.gpus
        beat = {"generation": a.desired.generation, "state": "running"}
        await svc.heartbeat(a.id, launcher.secrets[a.id], {**beat, "gpus": ["0", "1", "2", "3"]})
        assert a.reported.gpus == mine
        # A generation never granted, or GPUs this server does not have, hold nothing.
        await svc.heartbeat(a.id, launcher.secrets[a.id], {**beat, "generation": 99, "gpus": mine})
        assert a.reported.gpus == []
        await svc.heartbeat(a.id, launcher.secrets[a.id], {**beat, "gpus": [*mine, "7"]})
        assert a.reported.gpus == mine
        # The other three GPUs go to another job, which launches at once.
        b = await svc.submit(ANN, parse(SubmitRequest, synthetic(3, 3), "job"))
        await svc.step()
        assert b.id in launcher.secrets, "B was kept waiting by A's claim"
        assert set(b.desired.gpus).isdisjoint(mine)
        assert svc.holders() == {g: a.id for g in mine} | {g: b.id for g in b.desired.gpus}


async def test_a_resizing_job_holds_its_older_gpus_until_it_reports_the_new_grant(tmp_path):
    async with recording_service(tmp_path) as (svc, launcher):
        a = await svc.submit(ANN, parse(SubmitRequest, synthetic(1, 2), "job"))
        b = await svc.submit(ANN, parse(SubmitRequest, synthetic(1, 1), "job"))
        now = time.time()
        # Driven through the lifecycle, as decisions would: A on 0,1, then shrunk to 0.
        await svc.lifecycle.start(a, ["0", "1"], now)
        a.launched_at, a.secret_hash = now, hash_secret("a")
        await svc.heartbeat(a.id, "a", {"generation": 1, "gpus": ["0", "1"], "state": "running"})
        assert a.state == JobState.RUNNING
        await svc.lifecycle.change(a, ["0"], now)
        await svc.lifecycle.start(b, ["1"], now)
        # A still runs generation 1 on 0,1: B may not start on 1 yet.
        await svc.heartbeat(a.id, "a", {"generation": 1, "gpus": ["0", "1"], "state": "resizing"})
        assert a.reported.gpus == ["0", "1"]
        await svc._launch_ready(time.time())
        assert b.id not in launcher.secrets
        # Generation 2 reported: only its GPU is believed, and generation 1 is dropped.
        await svc.heartbeat(a.id, "a", {"generation": 2, "gpus": ["0", "1"], "state": "running"})
        assert a.reported.gpus == ["0"] and set(a.granted) == {2}
        await svc._launch_ready(time.time())
        assert b.id in launcher.secrets
        # A replay of the older generation claims nothing any more.
        await svc.heartbeat(a.id, "a", {"generation": 1, "gpus": ["0", "1"], "state": "running"})
        assert a.reported.gpus == []


def test_a_record_from_an_older_database_gets_its_grants():
    spec = parse(SubmitRequest, synthetic(1, 2), "job")
    job = JobRecord(id="j-1", user="ann", name="j", spec=spec, job_dir="/x")
    job.state, job.desired = JobState.RESIZING, Grant(2, ["0"])
    job.reported = Heartbeat(generation=1, gpus=["0", "1"])
    old = json.loads(json.dumps(job.to_dict()))
    del old["granted"]  # as saved before grants were kept
    assert JobRecord.from_dict(old).granted == {2: ["0"], 1: ["0", "1"]}
    old["state"] = "done"
    assert JobRecord.from_dict(old).granted == {}
    job.granted = {2: ["0"], 3: ["0", "1"]}
    again = JobRecord.from_dict(json.loads(json.dumps(job.to_dict())))
    assert again.granted == {2: ["0"], 3: ["0", "1"]}


def test_a_claim_outside_the_grant_is_not_busy_for_others():
    spec = parse(SubmitRequest, synthetic(1, 1), "job")
    a = JobRecord(id="a", user="ann", name="a", spec=spec, job_dir="/a")
    b = JobRecord(id="b", user="bob", name="b", spec=spec, job_dir="/b")
    a.state, a.desired, a.granted, a.launched_at = (
        JobState.RUNNING,
        Grant(1, ["0"]),
        {1: ["0"]},
        1.0,
    )
    grants.absorb(a, Heartbeat(generation=1, gpus=["0", "1", "2"]), False, {"0", "1", "2"})
    assert grants.busy_elsewhere(b, [a, b]) == {"0"}


def test_a_job_cancelled_before_its_sidecar_reports_keeps_its_first_gpus_busy():
    """Its sidecar was launched on GPU 0 and has reported nothing yet when the cancel comes (the
    cancel grant has no GPUs): its trainer may still start on GPU 0, so no one else is given it
    until the sidecar reports (a CI run once saw a new job started on GPU 0 meanwhile)."""
    spec = parse(SubmitRequest, synthetic(1, 1), "job")
    a = JobRecord(id="a", user="ann", name="a", spec=spec, job_dir="/a")
    b = JobRecord(id="b", user="bob", name="b", spec=spec, job_dir="/b")
    a.state, a.desired, a.granted, a.launched_at = (
        JobState.STOPPING,
        Grant(2, [], P.GrantAction.CANCEL),
        {1: ["0"]},
        1.0,
    )
    assert grants.busy_elsewhere(b, [a, b]) == {"0"}
    # Once its sidecar reports the cancel grant (no GPUs), GPU 0 is free for others.
    a.granted[2] = []
    grants.absorb(a, Heartbeat(generation=2, gpus=[]), False, {"0"})
    assert grants.busy_elsewhere(b, [a, b]) == set()


# -- through a real server -----------------------------------------------------------------------


def sidecar_of(job_dir: str) -> int:
    """The pid of the sidecar running ``job_dir`` (its argv names it)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"elastic_gpu_sidecar" in argv and job_dir.encode() in argv:
            return int(entry.name)
    return 0


def secret_of(pid: int) -> str:
    """The job secret in the sidecar's environment: its owner can read it, as the attacker
    here is that job's owner."""
    env = (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0")
    prefix = P.ENV_SECRET.encode() + b"="
    return next(e[len(prefix) :].decode() for e in env if e.startswith(prefix))


def heartbeat(api_url: str, job_id: str, secret: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{api_url}sidecar/{job_id}/heartbeat",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.slow
def test_a_forged_claim_on_every_gpu_blocks_nobody_on_a_real_server(server_process):
    s = server_process(port=free_port())
    code, a = call("POST", s.api_url + "jobs", s.token, synthetic(1, 1))
    assert code == 201, a

    def running(job_id):
        job = get_json(s.api_url + f"jobs/{job_id}", s.token)
        return job if job["state"] == "running" else None

    a = wait_for(lambda: running(a["id"]), 60, what="job A to run")
    pid = wait_for(lambda: sidecar_of(a["job_dir"]), 30, what="A's sidecar")
    secret = secret_of(pid)
    os.kill(pid, signal.SIGSTOP)  # its own heartbeats stop; the forged one stays the last
    try:
        beat = {"generation": a["generation"], "gpus": ["0", "1", "2", "3"], "state": "running"}
        heartbeat(s.api_url, a["id"], secret, beat)
        code, b = call("POST", s.api_url + "jobs", s.token, synthetic(3, 3, work=500))
        assert code == 201, b
        wait_for(lambda: running(b["id"]), 60, what="job B to run beside A's forged claim")
        status = get_json(s.api_url + "status", s.token)
        held = {g["id"]: g["holder"] for g in status["gpus"]}
        assert sorted(held.values()) == sorted([a["id"]] + [b["id"]] * 3)
        assert [held[g] for g in a["gpus"]] == [a["id"]]
    finally:
        os.kill(pid, signal.SIGKILL)
