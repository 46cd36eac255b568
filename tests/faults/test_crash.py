"""The crash suite: the Jupyter server, the shared scheduler, sidecars and trainers SIGKILLed
at seeded points of synthetic jobs' lives (crashkit). Afterwards no acknowledged progress
record is missing from the database, and every job has ended, done or failed with a reason.
"""

from __future__ import annotations

import os
import signal

import pytest
from crashkit import ENV, JOB, Crashes, progress
from faultkit import rows
from servers import DaemonProcess, HeartbeatRecorder, free_port, sidecar_python, wait_for

#: The seeds of the embedded runs (benchmarks/audit.py --seeds asks for more); the shared
#: scheduler's run takes the first seed after them.
SEEDS = [int(s) for s in os.environ.get("ELASTIC_GPU_CRASH_SEEDS", "1,2").split(",")]


@pytest.fixture
def recorder():
    with HeartbeatRecorder() as r:
        yield r


@pytest.mark.parametrize("seed", SEEDS)
def test_kills_in_the_embedded_scheduler(seed, launch, recorder, tmp_path, audit):
    server = launch(env=ENV, config={"LocalLauncher.python": sidecar_python(recorder, tmp_path)})
    recorder.target = server.url
    db = tmp_path / "server-data" / "scheduler.sqlite"
    crashes = Crashes(seed, {"server": server}, (server.api_url, server.token), recorder, db, audit)
    crashes.run()


def test_kills_around_the_shared_scheduler(launch, recorder, tmp_path, audit):
    daemon = DaemonProcess(tmp_path, free_port(), extra=["--job-root", str(tmp_path / "jobs")])
    daemon.state.mkdir(parents=True, mode=0o700)
    token = daemon.add_user("root")  # the user's server runs as this test's account
    daemon.start()
    try:
        recorder.target = daemon.api_url.split("elastic-gpu/")[0]
        server = launch(
            env=ENV,
            config={
                "scheduler_url": daemon.api_url,
                "scheduler_token": token,
                "LocalLauncher.python": sidecar_python(recorder, tmp_path),
            },
            name="user",
        )
        db = daemon.state / "scheduler.sqlite"
        processes = {"daemon": daemon, "server": server}
        seed = max(SEEDS) + 1
        crashes = Crashes(seed, processes, (server.api_url, server.token), recorder, db, audit)
        crashes.run()
    finally:
        daemon.stop()


def test_progress_written_while_the_server_is_down_reaches_the_database(
    launch, recorder, tmp_path, audit
):
    """The sidecar sends what was not acknowledged: the records its trainer wrote while the
    scheduler was down arrive once it is back (not only the latest)."""
    server = launch(env=ENV, config={"LocalLauncher.python": sidecar_python(recorder, tmp_path)})
    recorder.target = server.url
    code, job = audit.call("POST", server.api_url + "jobs", server.token, dict(JOB, name="down"))
    assert code == 201
    wait_for(lambda: progress(job), 60, what="the job to make progress")
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    audit.kills.append("server while running")
    before = len(progress(job))
    wait_for(lambda: len(progress(job)) >= before + 5, 30, what="progress while it is down")
    down = {r["t"] for r in progress(job)[before:]}
    server.start()
    db = tmp_path / "server-data" / "scheduler.sqlite"

    def arrived():
        return down <= {
            t for (t,) in rows(db, "SELECT t FROM progress WHERE job_id = ?", (job["id"],))
        }

    wait_for(arrived, 30, what="what was written while it was down to reach the database")
    audit.acknowledged = len(down)
