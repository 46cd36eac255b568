"""One scheduler per database: a second server (or shared scheduler) on the same db_path is
refused, naming the pid that holds it, instead of both overwriting each other's writes; and
the database, its WAL and SHM are readable by the scheduler's account only."""

from __future__ import annotations

import os
import stat
import sys

from servers import DaemonProcess, free_port, get_json, wait_for

JOB = {
    "kind": "synthetic",
    "min_gpus": 4,
    "max_gpus": 4,
    "synthetic": {"work": 10**6, "throughput": {"4": 100}, "batch": 10},
}


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_second_server_on_one_database_is_refused_with_the_holders_pid(launch, tmp_path, audit):
    db = tmp_path / "fresh" / "folder" / "scheduler.sqlite"
    first = launch(config={"db_path": str(db)}, name="first")
    code, job = audit.call("POST", first.api_url + "jobs", first.token, JOB)
    assert code == 201
    second = launch(scheduler=False, config={"db_path": str(db)}, name="second")
    for route in ("whoami", "jobs", "status"):
        code, doc = audit.call("GET", second.api_url + route, second.token)
        assert (code, doc["reason"]) == (503, "storage-unavailable"), doc
        assert f"in use by another scheduler (pid {first.proc.pid}" in doc["message"], doc
    code, doc = audit.call("POST", second.api_url + "jobs", second.token, JOB)
    assert code == 503
    assert get_json(second.url + "api/status", second.token)  # JupyterLab serves on
    # the first one never saw a second writer
    listing = get_json(first.api_url + "jobs", first.token)["jobs"]
    assert [j["id"] for j in listing] == [job["id"]]
    # readable by this account only; its folder too, created by the scheduler
    for path in (db, f"{db}-wal", f"{db}-shm", f"{db}.lock"):
        assert mode(path) == 0o600, (path, oct(mode(path)))
    assert mode(db.parent) == 0o700
    # once the first is gone, the second one's next request starts its scheduler
    first.stop()

    def serves():
        code, doc = audit.call("GET", second.api_url + "jobs", second.token)
        return doc if code == 200 else None

    jobs = wait_for(serves, 30, interval=1.0, what="the second scheduler to start")["jobs"]
    assert [j["id"] for j in jobs] == [job["id"]]
    assert not audit.unexplained


def test_a_second_shared_scheduler_exits_with_the_holders_pid(tmp_path, audit):
    first = DaemonProcess(tmp_path, free_port())
    first.state.mkdir(parents=True, mode=0o700)
    first.start()
    try:
        second = DaemonProcess(tmp_path, free_port())
        second.log_path = tmp_path / "second-daemon.log"
        args = [
            sys.executable,
            "-m",
            "jupyter_elastic_gpu.cli",
            "scheduler",
            "--port",
            str(second.port),
            "--state-dir",
            str(first.state),
        ]
        second._spawn(args, {**os.environ, "ELASTIC_GPU_DAEMON_DIR": str(tmp_path / "d2")})
        code = second.proc.wait(timeout=60)
        last = second.log_path.read_text().strip().splitlines()[-1]
        assert code == 1, last
        assert last.startswith("jupyter-elastic-gpu scheduler: error: the scheduler database")
        assert f"in use by another scheduler (pid {first.proc.pid}" in last
        audit.answer(503, {"reason": "exit 1"}, "second daemon start")
        assert first.proc.poll() is None  # the first one serves on
    finally:
        first.stop()
