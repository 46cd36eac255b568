"""Leases are admitted like jobs: never overlapping each other or training jobs, freed at
once when their kernel shuts down, reclaimed from idle kernels when jobs wait."""

from __future__ import annotations

import os
import signal

from servers import DaemonProcess, free_port

from jupyter_elastic_gpu.kernels import ENV_CUDA, NO_GPU

SYNTHETIC = {
    "kind": "synthetic",
    "name": "trainer",
    "synthetic": {"work": 1e9, "throughput": {"1": 1000, "2": 1900, "4": 3600}},
}


def held(jobs: list[dict]) -> list[str]:
    """Every GPU held by an open job, once per holder (a GPU twice in it: an overlap)."""
    return [g for j in jobs if j["state"] not in ("done", "failed", "cancelled") for g in j["gpus"]]


def no_overlap(jobs: list[dict]) -> list[dict]:
    gpus = held(jobs)
    assert len(gpus) == len(set(gpus)), f"two holders on one GPU: {jobs}"
    return jobs


def test_two_users_leases_never_overlap_each_other_or_training_jobs(tmp_path, lab):
    daemon = DaemonProcess(tmp_path, free_port())
    daemon.start()
    try:
        tokens = {u: daemon.add_user(u) for u in ("alice", "bob")}
        admin = daemon.add_user("root-admin", admin=True)
        servers = {
            u: lab(config={"scheduler_url": daemon.api_url, "scheduler_token": t}, name=u)
            for u, t in tokens.items()
        }

        def everything() -> list[dict]:
            from servers import get_json

            return no_overlap(get_json(daemon.api_url + "jobs", admin)["jobs"])

        kernels = {u: s.start_kernel("python3-gpu2") for u, s in servers.items()}
        leases = {j["user"]: j for j in everything() if j["kind"] == "interactive"}
        assert {u: leases[u]["state"] for u in kernels} == {"alice": "running", "bob": "running"}
        for user, server in servers.items():
            assert server.env(kernels[user], ENV_CUDA) == ",".join(leases[user]["gpus"])

        status, job = servers["bob"].api(
            "POST", "elastic-gpu/api/jobs", {**SYNTHETIC, "min_gpus": 2}
        )
        assert status == 201, job
        waiting = servers["bob"].until(
            lambda: next(j for j in everything() if j["id"] == job["id"] and j["reason"] != ""),
            what="the job's first decision",
        )
        assert waiting["state"] == "queued" and waiting["gpus"] == []

        servers["alice"].shutdown_kernel(kernels["alice"])  # her lease ends, the job starts
        started = servers["bob"].until(
            lambda: next(
                (j for j in everything() if j["id"] == job["id"] and j["state"] == "running"), None
            ),
            what="the job to start on alice's GPUs",
        )
        assert set(started["gpus"]) == set(leases["alice"]["gpus"])
        bob = next(j for j in everything() if j["id"] == leases["bob"]["id"])
        assert bob["state"] == "running" and bob["gpus"] == leases["bob"]["gpus"]
    finally:
        daemon.stop()


def test_idle_lease_is_warned_then_released_and_the_waiting_job_starts(lab):
    server = lab(
        config={
            "InteractiveLeases.idle_timeout": 600.0,
            "InteractiveLeases.idle_timeout_contended": 8.0,
            "InteractiveLeases.idle_warning": 6.0,
        }
    )
    kernel = server.start_kernel("python3-gpu2")
    (lease,) = server.leases()
    assert server.env(kernel, ENV_CUDA) == ",".join(lease["gpus"])

    status, job = server.api("POST", "elastic-gpu/api/jobs", {**SYNTHETIC, "min_gpus": 4})
    assert status == 201, job
    warned = server.until(
        lambda: next((j for j in server.leases() if j["reason"].startswith("idle:")), None),
        what="the idle warning",
    )
    assert "jobs wait for 4 GPUs" in warned["reason"] and warned["state"] == "running"

    def released():
        jobs = {j["id"]: j for j in server.jobs()}
        ok = jobs[lease["id"]]["state"] == "done" and jobs[job["id"]]["state"] == "running"
        return jobs if ok else None

    jobs = no_overlap(list(server.until(released, what="the release and the job's start").values()))
    ended = next(j for j in jobs if j["id"] == lease["id"])
    assert ended["reason"].startswith("released:") and "restarts without GPUs" in ended["reason"]
    assert server.env(kernel, ENV_CUDA) == NO_GPU  # the same kernel, restarted without GPUs


def test_a_kernel_that_dies_ends_its_lease_within_a_heartbeat(lab):
    """Killed (kill -9, not shut down), with no restarter to bring it back: its provisioner
    sees the process gone at its next heartbeat and ends the lease, and the GPUs are free."""
    server = lab(config={"KernelManager.autorestart": False})
    kernel = server.start_kernel("python3-gpu1")
    (lease,) = server.leases()
    pid = int(server.run(kernel, "import os; print(os.getpid())").strip())
    os.kill(pid, signal.SIGKILL)
    ended = server.until(
        lambda: next((j for j in server.leases() if j["state"] == "failed"), None),
        timeout=30,
        what="the dead kernel's lease to end",
    )
    assert ended["id"] == lease["id"] and ended["gpus"] == []
    assert "its kernel died" in ended["reason"], ended
    status, gpus = server.api("GET", "elastic-gpu/api/gpus")
    assert status == 200 and all(g["holder"] is None for g in gpus["gpus"]), gpus
