"""The scheduler protocol against a real HTTP server (the standard library's)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from elastic_gpu_sidecar import protocol as P
from servers import free_port
from sidecar_helpers import ENV, finish, progress, start, status, wait_for

SECRET = "s3cret-for-this-job"
BODY_KEYS = {
    "job_id",
    "generation",
    "gpus",
    "state",
    "progress",
    "backlog",
    "throughput",
    "resize_cost_s",
    "sidecar_pid",
    "trainer_pid",
    "restarts",
    "error",
    "exit_code",
}


class FakeScheduler(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.beats: list[dict] = []
        self.headers_seen: list[dict] = []
        self.paths: list[str] = []
        self.grant = {"generation": 1, "gpus": ["0"], "action": "run"}
        self.code = 200
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/elastic/jobs/j1/heartbeat"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        srv: FakeScheduler = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.beats.append(body)
            srv.headers_seen.append(dict(self.headers))
            srv.paths.append(self.path)
            code, grant = srv.code, dict(srv.grant)
        data = json.dumps(grant if code == 200 else {"error": "no"}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def scheduler():
    srv = FakeScheduler()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def run_job(job: Path, url: str, work: int, secret: str = SECRET, *extra: str):
    env = dict(ENV, **{P.ENV_SECRET: secret})
    return start(
        job,
        "--gpus",
        "0",
        "--synthetic",
        "--profile",
        "1:100,2:190",
        "--work",
        str(work),
        "--time-scale",
        "10",
        "--scheduler-url",
        url,
        "--job-id",
        "j1",
        "--heartbeat",
        "0.2",
        *extra,
        env=env,
    )


def test_heartbeat_reports_progress_and_applies_the_scheduler_grant(tmp_path, scheduler):
    job = tmp_path / "job"
    proc = run_job(job, scheduler.url, work=10**6)

    def beat_with_progress():
        with scheduler.lock:
            return next((b for b in scheduler.beats if b["progress"] and b["throughput"]), None)

    beat = wait_for(beat_with_progress, timeout=30, proc=proc, what="a heartbeat with progress")
    assert set(beat) == BODY_KEYS
    assert beat["job_id"] == "j1" and beat["state"] == "running" and beat["generation"] == 1
    assert beat["gpus"] == ["0"] and beat["sidecar_pid"] == proc.pid and beat["trainer_pid"]
    assert set(beat["throughput"]) == {"1"}
    assert beat["throughput"]["1"] == pytest.approx(1000, rel=0.2)  # 100/s at time-scale 10
    assert beat["progress"]["replicas"] == 1 and beat["resize_cost_s"] is None
    assert scheduler.headers_seen[0]["Authorization"] == f"Bearer {SECRET}"
    assert set(scheduler.paths) == {"/api/elastic/jobs/j1/heartbeat"}
    # the secret is in neither command line, nor in the environment of the user's process
    trainer = beat["trainer_pid"]
    assert SECRET.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert SECRET.encode() not in Path(f"/proc/{trainer}/environ").read_bytes()

    with scheduler.lock:
        scheduler.grant = {"generation": 2, "gpus": ["0", "1"], "action": "run"}
    wait_for(
        lambda: status(job)["generation"] == 2 and status(job)["state"] == "running",
        timeout=30,
        proc=proc,
        what="the new grant to run",
    )
    assert json.loads((job / "grant.json").read_text())["gpus"] == ["0", "1"]

    def beat_after_resize():
        with scheduler.lock:
            return next(
                (b for b in scheduler.beats if b["resize_cost_s"] and "2" in b["throughput"]), None
            )

    beat = wait_for(beat_after_resize, timeout=30, proc=proc, what="throughput on 2 GPUs")
    assert beat["throughput"]["2"] == pytest.approx(1900, rel=0.2)
    assert beat["resize_cost_s"] == pytest.approx(status(job)["resizes"][0]["pause_s"])

    with scheduler.lock:
        scheduler.grant = {"generation": 2, "gpus": [], "action": "stop"}
    code, _, err = finish(proc)
    assert code == P.EXIT_SUSPENDED, err
    final = scheduler.beats[-1]
    assert final["state"] == "suspended" and final["exit_code"] == P.EXIT_SUSPENDED


def test_rejected_or_unreachable_scheduler_leaves_the_job_running(tmp_path, scheduler):
    scheduler.code = 401
    job = tmp_path / "job"
    proc = run_job(job, scheduler.url, work=4000, secret="wrong")
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    log = (job / "sidecar.log").read_text()
    assert log.count("scheduler rejected this job's credentials (HTTP 401)") == 1
    assert len(scheduler.beats) > 3  # it kept trying, and sent a final heartbeat
    assert scheduler.beats[-1]["state"] == "done"

    dead = f"http://127.0.0.1:{free_port()}/heartbeat"  # a port nobody listens on
    job2 = tmp_path / "job2"
    # (an ended sidecar sends its last heartbeat for --final-linger seconds: not here)
    code, _, err = finish(run_job(job2, dead, 4000, SECRET, "--final-linger", "0"))
    assert code == P.EXIT_DONE, err
    log = (job2 / "sidecar.log").read_text()
    assert log.count("scheduler unreachable") == 1
    assert "keeping the current grant" in log


def test_progress_written_while_the_scheduler_fails_reaches_it_when_it_answers(tmp_path, scheduler):
    """Every record is sent until a heartbeat carrying it is answered 2xx: what the trainer
    wrote while the scheduler answered 503 (or was down) arrives in the backlog once it
    answers 200 again, and nothing acknowledged is sent twice."""
    job = tmp_path / "job"
    proc = run_job(job, scheduler.url, work=10**6)

    def sent_progress():
        with scheduler.lock:
            return any(b["progress"] for b in scheduler.beats)

    wait_for(sent_progress, timeout=30, proc=proc, what="a heartbeat with progress")
    with scheduler.lock:
        scheduler.code = 503  # the scheduler cannot store anything
        failing_from = len(scheduler.beats)
    written = len(progress(job))
    wait_for(lambda: len(progress(job)) >= written + 5, timeout=30, proc=proc, what="more progress")
    with scheduler.lock:
        scheduler.code = 200
        back_at = len(scheduler.beats)

    def answered_again():
        with scheduler.lock:
            return len(scheduler.beats) > back_at + 1

    wait_for(answered_again, timeout=30, proc=proc, what="heartbeats answered 200 again")
    with scheduler.lock:
        scheduler.grant = {"generation": 1, "gpus": [], "action": "cancel"}
    code, _, err = finish(proc)
    assert code == P.EXIT_CANCELLED, err
    with scheduler.lock:
        beats = list(enumerate(scheduler.beats))
    answered = [b for i, b in beats if not failing_from <= i < back_at]
    carried = [r["t"] for b in answered for r in [*b["backlog"], b["progress"]] if r]
    written_t = [r["t"] for r in progress(job)]
    assert set(written_t) <= set(carried), "a record never reached the scheduler"
    first_back = beats[back_at][1]
    ts = [r["t"] for r in [*first_back["backlog"], first_back["progress"]]]
    assert len(ts) >= 5  # the records written during the outage, in one heartbeat
    assert ts == sorted(ts), "the backlog is oldest first, the newest as progress"
    # acknowledged records are not sent again: only the newest one stays in ``progress`` (the
    # sidecar's latest state, repeated while the trainer writes nothing new; the scheduler
    # knows a record by its time)
    acknowledged: set[float] = set()
    latest = None
    for b in answered:
        for r in b["backlog"]:
            assert r["t"] not in acknowledged, "an acknowledged record was sent again"
        if b["progress"]:
            t = b["progress"]["t"]
            assert t == latest or t not in acknowledged, "an old record was sent as progress"
            latest = t
        acknowledged.update(r["t"] for r in [*b["backlog"], b["progress"]] if r)


def test_the_end_reaches_a_scheduler_that_was_failing_when_the_job_ended(tmp_path, scheduler):
    """A job that ends while its scheduler fails (a server being restarted) keeps sending its
    last heartbeat until one is answered: the scheduler learns the end, with every record
    written meanwhile, instead of finding a dead sidecar."""
    with scheduler.lock:
        scheduler.code = 503
    job = tmp_path / "job"
    proc = run_job(job, scheduler.url, 4000)

    def ended_unanswered():
        with scheduler.lock:
            return any(b["state"] == "done" for b in scheduler.beats)

    wait_for(ended_unanswered, timeout=60, proc=proc, what="the job's end, answered 503")
    assert proc.poll() is None  # still there, sending its end again
    with scheduler.lock:
        scheduler.code = 200
        back_at = len(scheduler.beats)
    code, _, err = finish(proc)
    assert code == P.EXIT_DONE, err
    with scheduler.lock:
        answered = scheduler.beats[back_at:]
    assert answered and all(b["state"] == "done" for b in answered)
    carried = {r["t"] for b in answered for r in [*b["backlog"], b["progress"]] if r}
    assert {r["t"] for r in progress(job)} <= carried  # nothing was acknowledged before
