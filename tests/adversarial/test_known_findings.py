"""The audit's findings (issue 10), each pinned through a real server: what was refused with a
500, let NaN into an answer, or changed the state before refusing, and now is a 4xx that
changes nothing (or an accepted request whose views stay valid JSON).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from fuzzkit import (
    HEARTBEAT,
    VIEWS,
    Tally,
    check_answer,
    job_path,
    jupyter_auth,
    operations,
    unchanged,
)
from fuzzservers import VALID_SUBMITS, five_states, synthetic, valid_heartbeats
from hostile import DEEP_LISTS, DEEP_OBJECTS, paths_of
from servers import wait_for

BIG = "1" + "0" * 310  # a 310-digit count

#: Heartbeats a typed model refuses before anything changes. Each used to get further: into
#: the progress table, the job record or the grant answered, then to a 500.
REFUSED_HEARTBEATS = [
    ('{"sidecar_pid": "x"}', "sidecar_pid"),
    ('{"sidecar_pid": [1]}', "sidecar_pid"),
    ('{"progress": {"t": 1, "samples": -1e308}}', "progress.samples"),
    (json.dumps({"throughput": {BIG: 5.0}}), "throughput"),
    ('{"progress": {"t": 1, "samples_per_s": -1}}', "progress.samples_per_s"),
    ('{"progress": {"t": 1, "samples_per_s": NaN}}', "progress.samples_per_s"),
    ('{"throughput": {"1": Infinity}}', "throughput.1"),
    ('{"throughput": {"1": 1e400}}', "throughput.1"),
    ('{"progress": {"t": NaN, "loss": -Infinity}}', "progress"),
    ('{"progress": {"t": 1, "metrics": {"acc": NaN}}}', "progress.metrics.acc"),
    ('{"resize_cost_s": Infinity, "state": "running"}', "resize_cost_s"),
    # the eight that got a 500 after part of the state had changed
    ('{"state": "done", "exit_code": "zero"}', "exit_code"),
    ('{"state": "failed", "error": "boom"}', "error"),
    ('{"state": "failed", "error": {"message": "no type"}}', "error.type"),
    ('{"state": "suspended", "generation": -1}', "generation"),
    ('{"state": "running", "progress": {"t": "now"}}', "progress.t"),
    ('{"state": "running", "gpus": [0, 1]}', "gpus"),
    (
        '{"state": "done", "progress": {"t": 1, "samples": "many"}, "exit_code": 0}',
        "progress.samples",
    ),
    ('{"generation": 9007199254740992, "state": "running"}', "generation"),
]


def body_of(answer) -> dict:
    return json.loads(answer.raw)


def known_heartbeats(server) -> None:
    jobs = five_states(server)
    tally = Tally("known heartbeats")
    for job in jobs:  # running, stopping, queued again, done, starting
        for raw, field in REFUSED_HEARTBEATS:
            before = server.fingerprint()
            headers = {"Authorization": f"Bearer {job['secret']}"}
            answer = server.client.send(
                "POST", f"sidecar/{job['id']}/heartbeat", raw.encode(), headers
            )
            check_answer(tally, HEARTBEAT, answer, HEARTBEAT, "post")
            assert answer.status == 400, (raw, answer.raw)
            assert field in body_of(answer)["message"], (raw, answer.raw)
            unchanged(tally, HEARTBEAT, before, server.fingerprint(), raw)
    # Deeply nested, from someone without the secret: refused before it is parsed.
    for body in (DEEP_LISTS, DEEP_OBJECTS):
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            before = server.fingerprint()
            answer = server.client.send("POST", f"sidecar/{jobs[0]['id']}/heartbeat", body, headers)
            check_answer(tally, HEARTBEAT, answer, HEARTBEAT, "post")
            assert answer.status == 401, answer.raw
            unchanged(tally, HEARTBEAT, before, server.fingerprint(), "deep")


async def test_refused_heartbeats_change_nothing_in_any_state(fuzz_server):
    await asyncio.to_thread(known_heartbeats, fuzz_server)


def speeds_of_almost_nothing(server) -> None:
    """One bad samples_per_s: a speed of 5e-324 samples/s is a valid speed, and the job's ETA
    (work left / speed) is past any float. It must read as unknown, not as Infinity (which
    json refuses to write: the job list answered 500 to its owner)."""
    jobs = five_states(server)
    tally = Tally("tiny speeds")
    running = jobs[0]
    auth = jupyter_auth("valid", server.token)[0]
    for speed in (5e-324, 1e-300):
        beat = valid_heartbeats(running)[0]
        beat["progress"]["samples_per_s"] = speed
        headers = {"Authorization": f"Bearer {running['secret']}"}
        answer = server.client.send(
            "POST", f"sidecar/{running['id']}/heartbeat", json.dumps(beat).encode(), headers
        )
        assert answer.status == 200, answer.raw
        for method, template in VIEWS:
            view = server.client.send(method, job_path(template, running["id"]), None, auth)
            check_answer(tally, template, view, template, method)
            assert view.status == 200, (template, view.raw)
        job = server.api("GET", f"jobs/{running['id']}")[1]
        assert job["eta_s"] is None and job["progress"]["samples_per_s"] == speed
        server.decide_now()


async def test_a_speed_of_almost_nothing_keeps_every_view_valid(fuzz_server):
    await asyncio.to_thread(speeds_of_almost_nothing, fuzz_server)


def submissions(server) -> None:
    server.start_jobs(1)
    server.pause()
    tally = Tally("known submissions")
    auth = jupyter_auth("valid", server.token)[0]
    refused = [
        ({**synthetic(), "synthetic": {"work": 10, "throughput": {BIG: 5}}}, "throughput"),
        ({**synthetic(), "min_gpus": int(BIG)}, "min_gpus"),
        ({**synthetic(), "priority": float("nan")}, "priority"),
        ({**synthetic(), "synthetic": {"work": float("inf"), "throughput": {"1": 1}}}, "work"),
        ({**synthetic(), "inputs": {f"x{i}": "" for i in range(100_000)}}, "inputs"),
    ]
    for body, field in refused:
        before = server.fingerprint()
        answer = server.client.send("POST", "jobs", json.dumps(body).encode(), auth)
        check_answer(tally, "/jobs", answer, "/jobs", "post")
        assert answer.status == 400 and field in body_of(answer)["message"], answer.raw
        assert len(body_of(answer)["message"]) < 2000
        unchanged(tally, "/jobs", before, server.fingerprint(), field)
    # Every field of a submission and of a heartbeat, with a value of each wrong JSON type.
    wrong = [None, "x", [], {}, True, 1e308, -1e308, -1, 0, int(BIG), float("nan"), float("inf")]
    job = prepare_one(server)
    for method, template, base in [
        ("POST", "/jobs", VALID_SUBMITS[0]),
        ("POST", HEARTBEAT, valid_heartbeats(job)[0]),
    ]:
        headers = auth if template == "/jobs" else {"Authorization": f"Bearer {job['secret']}"}
        for path in paths_of(base):
            for value in wrong:
                doc = json.loads(json.dumps(base))
                target = doc
                for p in path[:-1]:
                    target = target[p]
                target[path[-1]] = value
                before = server.fingerprint()
                answer = server.client.send(
                    method, job_path(template, job["id"]), json.dumps(doc).encode(), headers
                )
                check_answer(tally, template, answer, template, method.lower())
                if answer.status >= 400:
                    unchanged(tally, template, before, server.fingerprint(), f"{path}={value!r}")
                elif template == "/jobs":
                    server.api("POST", f"jobs/{body_of(answer)['id']}/cancel")
                else:
                    server.restore(job["id"])


def prepare_one(server) -> dict:
    """The running job of ``start_jobs``, its record kept to put back after each heartbeat."""
    job = next(j for j in server.service.jobs.values() if j.state == "running")
    secret = server.secret(job.id)["secret"]
    server.keep_baseline()
    return {
        "id": job.id,
        "secret": secret,
        "generation": job.desired.generation,
        "gpus": job.desired.gpus,
    }


async def test_wrong_types_and_huge_counts_are_refused_without_a_trace(fuzz_server):
    await asyncio.to_thread(submissions, fuzz_server)


def bodies_and_paths(server) -> None:
    jobs = server.start_jobs(1)
    server.pause()
    tally = Tally("limits")
    auth = jupyter_auth("valid", server.token)[0]
    job_id = jobs[0]["id"]
    big = b" " * (1024 * 1024 + 1)
    for method, template in operations():
        path = job_path(template, job_id)
        for body in (DEEP_LISTS, DEEP_OBJECTS, big):
            before = server.fingerprint()
            answer = server.client.send(method, path, body, auth, [("timeout", "0")])
            check_answer(tally, template, answer, template, method.lower())
            if body is big and template != "/jobs":
                assert answer.status == 413, (template, answer.raw)
            elif method == "POST" and template in ("/jobs", HEARTBEAT):
                assert answer.status in (400, 401), (template, answer.raw)
            if answer.status >= 400:
                unchanged(
                    tally, template, before, server.fingerprint(), f"{template} {body[:10]!r}"
                )
    # A submission keeps its large limit: passed variables travel in it.
    inputs = {"x_train": "A" * (3 * 1024 * 1024)}
    answer = server.client.send(
        "POST", "jobs", json.dumps({**synthetic(), "inputs": inputs}).encode(), auth
    )
    assert answer.status == 201, answer.raw[:300]
    # Any other path under the API root, and other methods: JSON, not the server's HTML.
    for method, path in [
        ("GET", "jobs/" + "j" * 65),
        ("GET", "jobs/"),
        ("GET", "nope"),
        ("POST", "jobs/a%20b/cancel"),
        ("POST", "sidecar/%2e%2e/heartbeat"),
        ("DELETE", "jobs"),
        ("PUT", f"jobs/{job_id}"),
        ("PATCH", "whoami"),
    ]:
        for headers in (auth, {}):
            answer = server.client.send(method, path, b"{}", headers)
            assert 400 <= answer.status < 500, (method, path, answer.status)
            assert isinstance(answer.json()["message"], str), answer.raw


async def test_body_limits_and_unknown_paths(fuzz_server):
    await asyncio.to_thread(bodies_and_paths, fuzz_server)


def test_nan_never_reaches_any_users_answers(fuzz_daemon):
    """On the shared scheduler, a sidecar with its job's secret sends NaN and Infinity in
    every number it reports: each heartbeat is refused and changes nothing, and every user's
    answers stay strict JSON under the document. (The job has ended first, so that the
    scheduler's own loop leaves it alone while the fingerprints are compared.)"""
    d = fuzz_daemon
    code, job = d.api("POST", "jobs", "alice", synthetic("alices", 1, 1))
    assert code == 201

    def launched():
        launches = d.api("GET", "launches", "alice")[1]["launches"]
        return next((x for x in launches if x["job_id"] == job["id"]), None)

    launch = wait_for(launched, 30, what="alice's launch")
    path, headers = (
        f"sidecar/{job['id']}/heartbeat",
        {"Authorization": f"Bearer {launch['secret']}"},
    )
    beat = {"generation": launch["generation"], "gpus": launch["gpus"]}
    for state in ("running", "done"):
        answer = d.client.send("POST", path, json.dumps({**beat, "state": state}).encode(), headers)
        assert answer.status == 200, answer.raw
    assert d.api("GET", f"jobs/{job['id']}", "alice")[1]["state"] == "done"
    tally = Tally("NaN")
    progress = {"t": 1.0, "samples": 1.0, "samples_per_s": 1.0, "loss": 1.0, "metrics": {"a": 1.0}}
    base = {
        **beat,
        "state": "done",
        "progress": progress,
        "throughput": {"1": 1.0},
        "resize_cost_s": 1.0,
    }
    for where in [p for p in paths_of(base) if isinstance(_at(base, p), float)]:
        for value in (float("nan"), float("inf"), float("-inf")):
            doc = json.loads(json.dumps(base))
            _at(doc, where[:-1])[where[-1]] = value
            raw = json.dumps(doc)  # NaN, Infinity, -Infinity as bare tokens
            before = d.fingerprint()
            answer = d.client.send("POST", path, raw.encode(), headers)
            check_answer(tally, HEARTBEAT, answer, HEARTBEAT, "post")
            assert answer.status == 400, raw
            unchanged(tally, HEARTBEAT, before, d.fingerprint(), raw)
    answer = d.client.send("POST", path, json.dumps(base).encode(), headers)
    assert answer.status == 200, answer.raw
    for user in ("alice", "bob", "ops"):
        for template in ("/status", "/jobs", "/queue"):
            auth = {"Authorization": f"token {d.tokens[user]}"}
            answer = d.client.send("GET", template.lstrip("/"), None, auth)
            check_answer(tally, template, answer, template, "get")
            assert answer.status == 200


def _at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def test_no_token_reaches_the_log(fuzz_daemon):
    """A token in the query string (a valid one, or a real one with a typo) is never written to
    the scheduler's log, refused or not; the log still names the request."""
    d = fuzz_daemon
    typo = d.tokens["alice"][:-1] + ("x" if d.tokens["alice"][-1] != "x" else "y")
    for token in (d.tokens["alice"], typo):
        for route in ("whoami", "jobs", f"jobs/{d.jobs['bob']}", "no/such/route"):
            url = f"{d.proc.api_url}{route}?token={token}&other=1"
            try:
                urllib.request.urlopen(url, timeout=10).read()
            except urllib.error.HTTPError as e:
                assert e.code in (401, 403, 404), e.code
    # A request the scheduler answers once it has logged the ones before.
    assert d.api("GET", "whoami", "alice")[0] == 200
    log = d.proc.log_path.read_text(errors="replace")
    assert "401 GET /elastic-gpu/api/whoami?token=[secret]&other=1" in log
    assert d.tokens["alice"] not in log and typo not in log
