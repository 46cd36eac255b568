"""A job row that does not parse, and a damaged database file.

One bad row is quarantined (moved aside whole, with the error; said in the log and in the
event log) and the rest serves. A damaged file makes every route of the extension answer 503
with what to do while JupyterLab itself still serves, and the scheduler comes back without a
restart once `jupyter elastic-gpu doctor --repair` has recovered the file; the shared
scheduler refuses to start on it, exiting non-zero with the same words.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

from faultkit import rows
from servers import DaemonProcess, call, free_port, get_json, wait_for

JOB = {
    "kind": "synthetic",
    "min_gpus": 4,  # more than the 4 GPUs once two of them run: some stay queued
    "max_gpus": 4,
    "synthetic": {"work": 10**6, "throughput": {"4": 100}, "batch": 10},
}
ROUTES = ("whoami", "gpus", "jobs", "queue", "status")


def doctor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def three_jobs(launch, db) -> list[str]:
    """A database with three jobs in it, written by a real server (stopped cleanly)."""
    server = launch(config={"db_path": str(db)}, name="first")
    ids = []
    for i in range(3):
        code, job = server_call(server, "POST", "jobs", dict(JOB, name=f"job-{i}"))
        assert code == 201, job
        ids.append(job["id"])
    for job_id in ids:
        server_call(server, "POST", f"jobs/{job_id}/cancel", {})
    server.stop()
    return ids


def server_call(server, method, route, body=None):
    return call(method, server.api_url + route, server.token, body)


def test_a_bad_job_row_is_quarantined_and_the_rest_serves(launch, tmp_path, audit):
    db = tmp_path / "data" / "scheduler.sqlite"
    ids = three_jobs(launch, db)
    with sqlite3.connect(db) as con:  # one row that does not parse, one of the wrong shape
        con.execute("UPDATE jobs SET data = '{not json' WHERE id = ?", (ids[0],))
        con.execute(
            "UPDATE jobs SET data = json_set(data, '$.history', 'x') WHERE id = ?", (ids[1],)
        )
    raw = rows(db, "SELECT id, user, state, submitted_at, data FROM jobs WHERE id = ?", (ids[0],))
    server = launch(config={"db_path": str(db)}, name="again")
    for route in ROUTES:
        code, doc = audit.call("GET", server.api_url + route, server.token)
        assert code == 200, (route, doc)
    listed = [j["id"] for j in get_json(server.api_url + "jobs", server.token)["jobs"]]
    assert listed == [ids[2]]
    code, doc = audit.call("GET", server.api_url + f"jobs/{ids[2]}/events", server.token)
    assert code == 200
    code, doc = audit.call("POST", server.api_url + "jobs", server.token, JOB)
    assert code == 201, doc
    # kept, whole and untouched, with the error; said in the event log and the server's log
    kept = rows(
        db, "SELECT id, user, state, submitted_at, data, error FROM quarantine ORDER BY seq"
    )
    assert [k[0] for k in kept] == ids[:2]
    assert kept[0][:5] == raw[0]
    assert "JSONDecodeError" in kept[0][5] and "history" in kept[1][5]
    events = rows(db, "SELECT job_id, message FROM events WHERE kind = 'quarantined'")
    assert [e[0] for e in events] == ids[:2]
    assert "quarantine table" in events[0][1]
    log = server.log_path.read_text()
    assert log.count("could not be read from the database") == 2
    # the doctor lists them, and finds nothing else wrong
    done = doctor("--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"job {ids[0]} quarantined on" in done.stdout
    assert not audit.unexplained


def damage(db) -> None:
    """Overwrite every other page but the first with noise (bit rot, torn writes)."""
    size = os.path.getsize(db)
    assert size >= 4 * 4096, size
    with open(db, "r+b") as f:
        for page in range(1, size // 4096, 2):
            f.seek(page * 4096)
            f.write(os.urandom(4096))


def test_a_damaged_database_answers_503_everywhere_until_repaired(launch, tmp_path, audit):
    db = tmp_path / "data" / "scheduler.sqlite"
    three_jobs(launch, db)
    damage(db)
    server = launch(scheduler=False, config={"db_path": str(db)}, name="again")
    for route in (*ROUTES, "jobs/j-0123456789", "jobs/j-0123456789/events", "updates"):
        code, doc = audit.call("GET", server.api_url + route, server.token)
        assert (code, doc.get("reason")) == (503, "storage-unavailable"), (route, doc)
        assert "is damaged" in doc["message"] and "doctor --db" in doc["message"], doc
    code, doc = audit.call("POST", server.api_url + "jobs", server.token, JOB)
    assert code == 503, doc
    assert get_json(server.url + "api/status", server.token)  # JupyterLab serves on
    # the doctor finds it, and repairs it while this JupyterLab runs (its scheduler did not
    # start: the database is not held)
    found = doctor("--db", str(db))
    assert found.returncode == 1 and "the file is damaged" in found.stdout, found.stdout
    fixed = doctor("--db", str(db), "--repair")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "kept the damaged file as" in fixed.stdout and "is sound again" in fixed.stdout

    def serves():
        code, _ = audit.call("GET", server.api_url + "jobs", server.token)
        return code == 200

    wait_for(serves, 30, interval=1.0, what="the scheduler to start on the repaired database")
    code, doc = audit.call("POST", server.api_url + "jobs", server.token, JOB)
    assert code == 201, doc
    assert not audit.unexplained


def test_the_shared_scheduler_refuses_a_damaged_database(tmp_path, audit):
    daemon = DaemonProcess(tmp_path, free_port())
    daemon.state.mkdir(parents=True, mode=0o700)
    db = daemon.state / "scheduler.sqlite"
    db.write_bytes(os.urandom(8192))  # not a database at all
    daemon._spawn([*daemon_args(daemon)], dict(os.environ))
    code = daemon.proc.wait(timeout=60)
    out = daemon.log_path.read_text()
    assert code == 1, out[-2000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith("jupyter-elastic-gpu scheduler: error: the scheduler database")
    assert "is damaged" in last and "doctor --db" in last
    audit.answer(503, {"reason": "exit 1"}, "daemon start")


def daemon_args(daemon: DaemonProcess) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jupyter_elastic_gpu.cli",
        "scheduler",
        "--port",
        str(daemon.port),
        "--state-dir",
        str(daemon.state),
        "--simulated-gpus",
        "2",
    ]
