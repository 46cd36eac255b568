"""Crashes: the Jupyter server (and its scheduler) SIGKILLed mid-job, a sidecar SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from servers import call, free_port, get_json, wait_for

JOB = {
    "name": "survivor",
    "kind": "synthetic",
    "min_gpus": 1,
    "max_gpus": 4,
    "synthetic": {"work": 40_000, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
}


def status_file(job: dict) -> dict:
    return json.loads((Path(job["job_dir"]) / "status.json").read_text())


def progress_samples(job: dict) -> list[int]:
    path = Path(job["job_dir"]) / "progress.jsonl"
    return [json.loads(line)["samples"] for line in path.read_text().splitlines()]


def test_scheduler_killed_mid_job_readopts_the_running_trainer(server_process):
    port = free_port()
    server = server_process(port=port, name="first")
    code, job = call("POST", server.api_url + "jobs", server.token, JOB)
    assert code == 201

    def running():
        j = get_json(server.api_url + f"jobs/{job['id']}", server.token)
        return j if j["state"] == "running" and (j["progress"] or {}).get("samples") else None

    job = wait_for(running, 40, what="the job to run")
    before = status_file(job)
    samples_before = job["progress"]["samples"]

    server.kill()  # SIGKILL: no shutdown hook, no goodbye to the sidecar
    wait_for(
        lambda: max(progress_samples(job)) > samples_before + 200,
        20,
        what="the trainer to keep training while the scheduler is down",
    )
    again = server_process(port=port, name="first")  # same port, same database

    def readopted():
        j = get_json(again.api_url + f"jobs/{job['id']}", again.token)
        return j if j["state"] == "running" and j["progress"]["samples"] > samples_before else None

    after_job = wait_for(readopted, 30, what="the restarted scheduler to re-adopt the job")
    after = status_file(after_job)
    # Same sidecar, same trainer, no restart, and the work went on.
    assert after["sidecar_pid"] == before["sidecar_pid"]
    assert after["trainer_pid"] == before["trainer_pid"]
    assert after["restarts"] == 0 and after["generation"] == before["generation"]
    samples = progress_samples(after_job)
    assert samples == sorted(samples), "progress went backwards"
    events = get_json(again.api_url + f"jobs/{job['id']}/events", again.token)["events"]
    assert not [e for e in events if e["kind"] in ("lost", "failed")]

    # Now the sidecar dies (its trainer goes with it): the job is queued again and resumes
    # from its checkpoint, not from zero.
    os.kill(after["sidecar_pid"], signal.SIGKILL)
    checkpointed = max(progress_samples(after_job))

    def resumed():
        j = get_json(again.api_url + f"jobs/{job['id']}", again.token)
        st = status_file(j)
        return j if j["state"] == "running" and st["sidecar_pid"] != after["sidecar_pid"] else None

    wait_for(resumed, 40, what="the job to be relaunched")
    events = get_json(again.api_url + f"jobs/{job['id']}/events", again.token)["events"]
    kinds = [e["kind"] for e in events]
    assert "lost" in kinds and kinds.index("lost") < len(kinds) - 1
    lost = next(e for e in events if e["kind"] == "lost")
    assert "resumes from its last checkpoint" in lost["message"]
    first_new = [
        json.loads(line)
        for line in (Path(job["job_dir"]) / "progress.jsonl").read_text().splitlines()
        if json.loads(line).get("first")
    ][-1]
    assert first_new["resumed_from"] > 0
    assert first_new["samples"] >= min(checkpointed, samples_before)
    call("POST", again.api_url + f"jobs/{job['id']}/cancel", again.token, {})
