"""A database that cannot be written: every route says why and what to do, nothing is half
changed, and the scheduler carries on by itself once the fault is gone (no restart).

The faults are real (faultkit): another process holding SQLite's write lock, a full tmpfs, a
file size limit that makes SQLite's writes fail with a disk I/O error, a read-only file
system at start-up. A real sidecar runs a synthetic job through all of them, its heartbeats
through a recording proxy, so that what it was told and what reached the database can be
compared.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from faultkit import file_size_limit, fill, remount, tmpfs, write_locked
from servers import HeartbeatRecorder, get_json, sidecar_python, wait_for

JOB = {
    "name": "through-the-fault",
    "kind": "synthetic",
    "min_gpus": 1,
    "max_gpus": 1,
    "synthetic": {"work": 10**7, "throughput": {"1": 100}, "batch": 10},
}
ENV = {"ELASTIC_GPU_PROGRESS_INTERVAL": "0.2"}


@pytest.fixture
def recorder():
    with HeartbeatRecorder() as r:
        yield r


def start_server(launch, recorder, tmp_path, db: Path, **config):
    server = launch(
        env=ENV,
        config={
            "db_path": str(db),
            "LocalLauncher.python": sidecar_python(recorder, tmp_path),
            **config,
        },
    )
    recorder.target = server.url
    return server


def job_of(server, job_id: str) -> dict:
    return get_json(server.api_url + f"jobs/{job_id}", server.token)


def written(job: dict) -> list[dict]:
    """The progress records the trainer wrote into its job dir."""
    path = Path(job["job_dir"]) / "progress.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stored(server, job_id: str) -> set[float]:
    doc = get_json(server.api_url + f"jobs/{job_id}/progress", server.token)
    return {r["t"] for r in doc["progress"]}


def a_running_job(server, audit) -> dict:
    code, job = audit.call("POST", server.api_url + "jobs", server.token, JOB)
    assert code == 201, job

    def running():
        j = job_of(server, job["id"])
        return j if j["state"] == "running" and j["progress"] else None

    return wait_for(running, 60, what="the job to run")


def through_the_fault(server, recorder, job, audit, status: int, reason: str, words: str):
    """While the fault lasts: what each kind of request is answered, and that nothing changed;
    returns when the fault began."""
    began = time.time()
    before = job_of(server, job["id"])
    count = len(get_json(server.api_url + "jobs", server.token)["jobs"])
    code, doc = audit.call("POST", server.api_url + "jobs", server.token, JOB)
    assert (code, doc["reason"]) == (status, reason), doc
    assert words in doc["message"] and "nothing was changed" in doc["message"], doc
    code, doc = audit.call("POST", server.api_url + f"jobs/{job['id']}/cancel", server.token, {})
    assert (code, doc["reason"]) == (status, reason), doc
    after = job_of(server, job["id"])  # served from memory, as it was
    assert (after["state"], after["generation"], after["gpus"]) == (
        before["state"],
        before["generation"],
        before["gpus"],
    ), "a refused cancel changed the job"
    assert len(get_json(server.api_url + "jobs", server.token)["jobs"]) == count

    def refused_heartbeats():
        with recorder.lock:
            late = [s for body, s, _ in recorder.seen[-3:] if body.get("job_id") == job["id"]]
        return late and all(s == status for s in late)

    wait_for(refused_heartbeats, 30, what=f"heartbeats answered {status}")
    wait_for(
        lambda: len([r for r in written(job) if r["t"] > began]) >= 5,
        30,
        what="the trainer to write on through the fault",
    )
    return began


def after_the_fault(server, recorder, job, audit, began: float) -> None:
    """Once the fault is gone: no restart, nothing lost, changes work again."""
    during = {r["t"] for r in written(job) if r["t"] > began}
    wait_for(
        lambda: during <= stored(server, job["id"]),
        30,
        what="the progress written during the fault to reach the database",
    )
    acked = {r["t"] for r in recorder.acknowledged().get(job["id"], [])}
    lost = acked - stored(server, job["id"])
    audit.acknowledged, audit.lost, audit.jobs = len(acked), len(lost), 1
    assert not lost, f"{len(lost)} acknowledged records are not in the database"
    code, doc = audit.call("POST", server.api_url + f"jobs/{job['id']}/cancel", server.token, {})
    assert code == 202, doc
    wait_for(
        lambda: job_of(server, job["id"])["state"] == "cancelled", 30, what="the cancel to end"
    )
    code, doc = audit.call("POST", server.api_url + "jobs", server.token, JOB)
    assert code == 201, doc
    audit.call("POST", server.api_url + f"jobs/{doc['id']}/cancel", server.token, {})
    with recorder.lock:
        for _, status, answer in recorder.seen:
            if status != 502:  # 502: the proxy's own answer while the server was down
                audit.answer(status, answer, "heartbeat")
    assert not audit.unexplained, audit.unexplained


def test_a_locked_database_answers_503_and_recovers(launch, recorder, tmp_path, audit):
    db = tmp_path / "data" / "scheduler.sqlite"
    server = start_server(launch, recorder, tmp_path, db, db_busy_timeout=0.5)
    job = a_running_job(server, audit)
    with write_locked(db):
        began = through_the_fault(
            server, recorder, job, audit, 503, "storage-unavailable", "stayed locked"
        )
    after_the_fault(server, recorder, job, audit, began)


def test_a_full_disk_answers_507_and_recovers(launch, recorder, tmp_path, audit):
    with tmpfs(tmp_path / "small", size="2m") as small:
        db = small / "scheduler.sqlite"
        server = start_server(launch, recorder, tmp_path, db)
        job = a_running_job(server, audit)
        ballast = fill(small)
        began = through_the_fault(server, recorder, job, audit, 507, "storage-full", "is full")
        ballast.unlink()
        after_the_fault(server, recorder, job, audit, began)
        server.stop()  # before the file system goes


def test_a_failing_disk_answers_503_and_recovers(launch, recorder, tmp_path, audit):
    db = tmp_path / "data" / "scheduler.sqlite"
    server = start_server(launch, recorder, tmp_path, db)
    job = a_running_job(server, audit)
    # SQLite appends to the WAL: any write past its present end now fails with EFBIG
    with file_size_limit(server.proc.pid, max(os.path.getsize(f"{db}-wal"), 4096)):
        began = through_the_fault(
            server, recorder, job, audit, 503, "storage-unavailable", "failed a read or a write"
        )
    after_the_fault(server, recorder, job, audit, began)


def test_a_read_only_database_at_start_answers_503_until_it_is_writable(
    launch, recorder, tmp_path, audit
):
    with tmpfs(tmp_path / "small") as small:
        db = small / "scheduler.sqlite"
        first = start_server(launch, recorder, tmp_path, db)
        first.stop()
        remount(small, "ro")
        server = launch(scheduler=False, config={"db_path": str(db)}, name="again")
        for route in ("whoami", "jobs", "status", "gpus"):
            code, doc = audit.call("GET", server.api_url + route, server.token)
            assert (code, doc["reason"]) == (503, "storage-unavailable"), doc
            assert "read-only file system" in doc["message"], doc
        assert get_json(server.url + "api/status", server.token)  # JupyterLab still serves
        remount(small, "rw")

        def answers():
            code, _ = audit.call("GET", server.api_url + "jobs", server.token)
            return code == 200

        wait_for(answers, 30, interval=1.0, what="the scheduler to start once it can write")
        code, doc = audit.call("POST", server.api_url + "jobs", server.token, JOB)
        assert code == 201, doc
        audit.call("POST", server.api_url + f"jobs/{doc['id']}/cancel", server.token, {})
        server.stop()
