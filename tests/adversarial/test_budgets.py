"""A hostile user of the shared scheduler against its budgets, through a real daemon: large
bodies are refused from their headers (the scheduler's memory does not grow by them), the
scheduler takes no passed variables, one user's open jobs and stored bytes are bounded, and
connections that hold a socket without finishing a request are closed.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.error
import urllib.request

import pytest
from fuzzkit import Client, database_fingerprint
from fuzzservers import synthetic
from servers import DaemonProcess, free_port, wait_for

MB = 2**20


def memory_mb(pid: int, field: str) -> float:
    """A process's ``VmRSS`` (now) or ``VmHWM`` (its peak so far), from /proc, in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise LookupError(field)


def submission_of(size: int) -> bytes:
    """A valid submission of about ``size`` bytes: the bulk is a passed variable."""
    return json.dumps({**synthetic("big"), "inputs": {"x_train": "A" * size}}).encode()


def chunked_post(port: int, path: str, token: str, chunks: int, chunk: bytes) -> tuple:
    """(status, JSON) of a POST whose body comes chunked, with no Content-Length. The client
    may see the connection reset while it still sends (the server stopped reading at its
    limit); the answer is read all the same."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", f"token {token}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        try:
            for _ in range(chunks):
                conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.send(b"0\r\n\r\n")
        except OSError:
            pass
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def test_large_bodies_are_refused_unread(fuzz_daemon):
    """Four concurrent 50 MB submissions get 413 with the limit (decided from Content-Length:
    the bodies are dropped as they arrive, never buffered), the daemon's peak memory stays
    under twice its idle size, nothing is stored; a chunked body is cut off at the limit."""
    d = fuzz_daemon
    pid, token = d.proc.proc.pid, d.tokens["alice"]
    idle = memory_mb(pid, "VmRSS")
    before = d.fingerprint()
    body = submission_of(50 * MB)
    answers: list = []

    def post() -> None:
        answer = d.client.send("POST", "jobs", body, {"Authorization": f"token {token}"})
        answers.append((answer.status, answer.json()))

    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(answers) == 4, answers
    for status, doc in answers:
        assert status == 413, doc
        assert doc["reason"] == "too-large"
        assert "8 MB this route takes" in doc["message"], doc
        assert "passed variables" in doc["message"], doc
    peak = memory_mb(pid, "VmHWM")
    assert peak < 2 * idle, f"the daemon grew from {idle:.0f} MB to {peak:.0f} MB"
    status, doc = chunked_post(d.proc.port, "/elastic-gpu/api/jobs", token, 200, b"A" * 65536)
    assert status == 413 and "larger than 8 MB" in doc["message"], doc
    assert d.fingerprint() == before
    # A route that reads no body takes a few kB only.
    answer = d.client.send(
        "POST", f"jobs/{d.jobs['alice']}/cancel", b" " * 8192, {"Authorization": f"token {token}"}
    )
    assert answer.status == 413 and "4 kB" in answer.json()["message"], answer.raw
    # The daemon still answers, and a submission within the limit is taken.
    code, job = d.api("POST", "jobs", "alice", synthetic("small"))
    assert code == 201, job


def urllib_post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    """(status, JSON) of a POST sent the way urllib sends it: the whole body, then the answer."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_refusals_before_the_body_are_answered_after_it(fuzz_daemon):
    """A request refused from its headers (no credentials, a wrong token, XSRF, a body over its route's limit)
    gets its answer once its body has arrived: a client that sends the whole body before it
    reads (urllib) sees the 401 or 413, never a reset connection or a broken pipe. The
    2 MB bodies are larger than loopback's socket buffers, so an answer sent while the body
    still comes (the connection closed on it unread) fails the client."""
    d = fuzz_daemon
    base = f"http://127.0.0.1:{d.proc.port}/elastic-gpu/api/"
    body = submission_of(2 * MB)
    before = d.fingerprint()
    cases = [
        ("jobs", {}, 401),
        ("jobs", {"Authorization": "token not-a-token"}, 401),
        ("jobs", {"Cookie": "_xsrf=x; username-127-0-0-1=x"}, 401),
        # no route reads a body, so its size is refused first
        ("no/such/route", {"Authorization": f"token {d.tokens['alice']}"}, 413),
        ("no/such/route", {}, 413),
        ("jobs/nope/cancel", {"Authorization": "token not-a-token"}, 401),
    ]
    for path, headers, expected in cases:
        status, doc = urllib_post(base + path, body, headers)
        assert status == expected, (path, headers, doc)
        assert doc["message"], doc
    assert d.fingerprint() == before


def test_the_shared_scheduler_takes_no_passed_variables(fuzz_daemon):
    """Inputs sent to the daemon itself are refused (400, saying where they go), not dropped
    from a job that would then run without them; nothing is stored."""
    d = fuzz_daemon
    before = d.fingerprint()
    body = {**synthetic("with-inputs"), "inputs": {"x": "gASVBAAAAAAAAABLAS4="}}
    code, doc = d.api("POST", "jobs", "alice", body)
    assert code == 400, doc
    assert "takes no passed variables" in doc["message"]
    assert "your own Jupyter server" in doc["message"]
    assert d.fingerprint() == before


@pytest.fixture
def capped_daemon(tmp_path):
    """A shared scheduler where one user may have 3 open jobs and keep 2.5 MB."""
    proc = DaemonProcess(
        tmp_path,
        free_port(),
        extra=[
            "--SchedulerService.max_open_jobs=3",
            "--SchedulerService.max_stored_bytes=2500000",
        ],
    )
    proc.state.mkdir(parents=True)
    tokens = {user: proc.add_user(user, admin=user == "ops") for user in ("alice", "bob", "ops")}
    proc.start()
    yield proc, tokens
    proc.stop()


def test_one_users_open_jobs_and_stored_bytes_are_bounded(capped_daemon):
    proc, tokens = capped_daemon
    db = str(proc.state / "scheduler.sqlite")
    client = Client("127.0.0.1", proc.port, "/elastic-gpu/api/")

    def submit(user: str, body: dict) -> tuple[int, dict]:
        answer = client.send(
            "POST", "jobs", json.dumps(body).encode(), {"Authorization": f"token {tokens[user]}"}
        )
        return answer.status, answer.json()

    def decided(job_id: str) -> None:
        """Wait for the scheduler's first decision on a new job, which rewrites its row (its
        reason): the database is compared only once nothing else is under way."""
        auth = {"Authorization": f"token {tokens['alice']}"}
        wait_for(
            lambda: client.send("GET", f"jobs/{job_id}", None, auth).json()["reason_kind"] != "new",
            30,
            what=f"the first decision on {job_id}",
        )

    script = {"name": "big-script", "script": "#" + "x" * 900_000}  # 900 kB
    for _ in range(2):
        code, doc = submit("alice", script)
        assert code == 201, doc
        decided(doc["id"])
    before = database_fingerprint(db)
    code, doc = submit("alice", script)  # 2.7 MB in all
    assert code == 507, doc
    assert doc["reason"] == "over-storage-budget"
    assert "jobs take 1.72 MB" in doc["message"], doc
    assert "one user may keep 2.38 MB" in doc["message"], doc
    assert "c.SchedulerService.max_stored_bytes = 2500000" in doc["message"]
    assert database_fingerprint(db) == before
    code, doc = submit("alice", synthetic("third"))
    assert code == 201, doc
    decided(doc["id"])
    before = database_fingerprint(db)
    code, doc = submit("alice", synthetic("fourth"))
    assert code == 429, doc
    assert doc["reason"] == "too-many-jobs"
    assert "alice has 3 open jobs" in doc["message"]
    assert "c.SchedulerService.max_open_jobs = 3" in doc["message"]
    assert database_fingerprint(db) == before
    # Other users have budgets of their own; admins are bounded too.
    assert submit("bob", synthetic("bobs"))[0] == 201
    for name in ("ops-1", "ops-2", "ops-3"):
        assert submit("ops", synthetic(name))[0] == 201
    assert submit("ops", synthetic("ops-4"))[0] == 429
    # A job that ends gives its place back.
    listing = json.loads(
        client.send("GET", "jobs", None, {"Authorization": f"token {tokens['alice']}"}).raw
    )
    third = next(j for j in listing["jobs"] if j["name"] == "third")
    answer = client.send(
        "POST", f"jobs/{third['id']}/cancel", b"{}", {"Authorization": f"token {tokens['alice']}"}
    )
    assert answer.status == 202, answer.raw

    def ended() -> bool:
        answer = client.send(
            "GET", f"jobs/{third['id']}", None, {"Authorization": f"token {tokens['alice']}"}
        )
        return answer.json()["state"] == "cancelled"

    wait_for(ended, 30, what="the cancelled job to end")
    code, doc = submit("alice", synthetic("fourth"))
    assert code == 201, doc


def test_idle_connections_are_closed(tmp_path):
    """Half a request's headers, or half its body, and then nothing: the daemon closes the
    connection after its timeout (1 s here) instead of holding the socket for an hour."""
    proc = DaemonProcess(
        tmp_path,
        free_port(),
        extra=[
            "--DaemonServerApp.idle_connection_timeout=1",
            "--DaemonServerApp.body_timeout=1",
        ],
    )
    proc.state.mkdir(parents=True)
    token = proc.add_user("alice")
    proc.start()
    try:
        half_headers = b"POST /elastic-gpu/api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        half_body = (
            b"POST /elastic-gpu/api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: token " + token.encode() + b"\r\nContent-Length: 100\r\n\r\n{"
        )
        for start in (half_headers, half_body):
            with socket.create_connection(("127.0.0.1", proc.port)) as s:
                s.settimeout(30)  # far past the timeout: a socket still open then fails
                s.sendall(start)
                assert s.recv(4096) == b"", start  # closed by the server, with no answer
    finally:
        proc.stop()
