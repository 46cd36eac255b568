"""Which jobs a list shows (``GET jobs``/``GET status`` with all, state, user, since), who may
ask for whose, and the CLI's ``status`` options and exit codes against a real shared
scheduler with two users and an admin (``daemon`` fixture)."""

from __future__ import annotations

import subprocess
import time
from urllib.parse import urlencode

import pytest
from elastic_gpu_sidecar.protocol import JobState
from servers import call, run_cli

from jupyter_elastic_gpu.errors import Forbidden
from jupyter_elastic_gpu.models import JobFilter, SubmitRequest
from jupyter_elastic_gpu.scheduler.jobs import JobRecord
from jupyter_elastic_gpu.scheduler.port import views
from jupyter_elastic_gpu.scheduler.principal import Principal

NOW = 1_000_000.0
DAY = 86400.0
SPEC = SubmitRequest(kind="synthetic", synthetic={"work": 1e9, "throughput": {"1": 10}})


def job(job_id: str, user: str, state: str, ended_days_ago: float | None = None) -> JobRecord:
    finished = None if ended_days_ago is None else NOW - ended_days_ago * DAY
    return JobRecord(
        id=job_id,
        user=user,
        name=job_id,
        spec=SPEC,
        job_dir="/x",
        state=JobState(state),
        submitted_at=(finished or NOW) - 10,
        finished_at=finished,
    )


JOBS = [
    job("a-run", "alice", "running"),
    job("a-new", "alice", "done", 0.5),
    job("a-old", "alice", "failed", 3),
    job("a-older", "alice", "done", 40),
    job("b-q", "bob", "queued"),
    job("b-old", "bob", "cancelled", 5),
]


def ids(listed) -> set[str]:
    return {j.id for j in listed}


def test_select_by_time_state_and_user():
    alice = Principal("alice")
    since = JobFilter(since=NOW - DAY)
    listed, hidden = views.select(JOBS, alice, since, 50)
    assert ids(listed) == {"a-run", "a-new", "b-q"} and hidden == 3  # open ones are current
    listed, hidden = views.select(JOBS, alice, JobFilter(all=True), 50)
    assert ids(listed) == ids(JOBS) and hidden == 0
    listed, hidden = views.select(JOBS, alice, JobFilter(state=["done"], since=NOW - DAY), 50)
    assert ids(listed) == {"a-new"} and hidden == 1  # a-older: done, but older
    listed, hidden = views.select(JOBS, alice, JobFilter(user="alice", all=True), 50)
    assert ids(listed) == {"a-run", "a-new", "a-old", "a-older"}
    listed, hidden = views.select(JOBS, alice, JobFilter(), 1)  # no window: the newest of each
    assert ids(listed) == {"a-run", "a-new", "b-q", "b-old"} and hidden == 2
    assert listed == sorted(listed, key=lambda j: (j.submitted_at, j.id))  # oldest first


def test_only_admins_and_readers_of_all_name_another_user():
    with pytest.raises(Forbidden, match="only admins may list the jobs of another user"):
        views.select(JOBS, Principal("bob"), JobFilter(user="alice"), 50)
    for who in (Principal("ops", admin=True), Principal("rd", reads_all=True)):
        listed, _ = views.select(JOBS, who, JobFilter(user="alice", all=True), 50)
        assert len(listed) == 4


def test_status_lists_no_finished_job_of_another_user():
    status = views.status(JOBS, [], {}, Principal("bob"), 50, JobFilter(all=True))
    assert {j.id for j in status.jobs} == {"a-run", "b-q", "b-old"}


# -- the API and the CLI against a real shared scheduler ----------------------------------------


def synthetic(name: str) -> dict:
    return {"name": name, "kind": "synthetic", "synthetic": {"work": 1e9, "throughput": {"1": 5}}}


def cli(url: str, token: str, *argv: str) -> subprocess.CompletedProcess:
    return run_cli(url, token, *argv, timeout=60)


def test_filters_and_rights_through_the_api_and_the_cli(daemon):
    d, tokens = daemon
    url = d.api_url
    made = {}
    for user, name in (("alice", "a1"), ("alice", "a2"), ("bob", "b1")):
        code, doc = call("POST", url + "jobs", tokens[user], synthetic(name))
        assert code == 201, doc
        made[name] = doc["id"]
    # queued (no user server starts them): cancelled at once
    assert call("POST", url + f"jobs/{made['a1']}/cancel", tokens["alice"], {})[0] == 202

    def jobs(caller: str, **query) -> tuple[int, dict]:
        return call("GET", url + "jobs?" + urlencode(query), tokens[caller])

    code, doc = jobs("alice", state="cancelled")
    assert code == 200 and [j["id"] for j in doc["jobs"]] == [made["a1"]]
    code, doc = jobs("alice", since=time.time() + 3600)  # ended after then: none yet
    assert {j["id"] for j in doc["jobs"]} == {made["a2"], made["b1"]} and doc["hidden"] == 1
    code, doc = jobs("ops", user="alice", all="true")
    assert code == 200 and {j["id"] for j in doc["jobs"]} == {made["a1"], made["a2"]}
    code, doc = call("GET", url + "status?state=queued", tokens["alice"])
    assert code == 200 and {j["id"] for j in doc["jobs"]} == {made["a2"], made["b1"]}

    refusals = [
        ({"user": "alice"}, "bob", 403, "only admins may list the jobs of another user"),
        ({"state": "finished"}, "alice", 400, "state: unknown state 'finished'"),
        ({"since": "yesterday"}, "alice", 400, "since: expected a time in epoch seconds"),
        ({"since": "-5"}, "alice", 400, "since: must be at least 0"),
        ({"all": "true", "since": "5"}, "alice", 400, "do not go together"),
        ({"all": "maybe"}, "alice", 400, "all: expected true or false"),
    ]
    for query, user, status, message in refusals:
        for route in ("jobs", "status"):
            code, doc = call("GET", url + f"{route}?{urlencode(query)}", tokens[user])
            assert (code, doc["reason"]) == (
                status,
                "forbidden" if status == 403 else "bad-request",
            )
            assert message in doc["message"], (route, query, doc)

    # The CLI: the same filters, and each refusal's exit code with one line.
    res = cli(url, tokens["alice"], "status", "--state", "cancelled,queued")
    assert res.returncode == 0, res.stderr
    assert made["a1"] in res.stdout and made["a2"] in res.stdout and made["b1"] in res.stdout
    res = cli(url, tokens["alice"], "status", "--since", "2999-01-01")
    assert res.returncode == 0 and made["a1"] not in res.stdout
    assert "1 finished job ended earlier than --since 2999-01-01: --all lists them" in res.stderr
    res = cli(url, tokens["alice"], "status", "--all", "--json")
    assert made["a1"] in res.stdout and '"hidden": 0' in res.stdout
    cases = [
        (["status", "--user", "alice"], "bob", 4, "only admins may list the jobs of another"),
        (["cancel", made["a2"]], "bob", 4, f"job {made['a2']} belongs to alice"),
        (["keep", made["a1"]], "bob", 4, f"job {made['a1']} belongs to alice"),
        (["cancel", "j-nope"], "alice", 3, "no job 'j-nope'"),
        (["keep", "j-nope"], "alice", 3, "no job 'j-nope'"),
        (["status", "--state", "finished"], "alice", 2, "--state: unknown state 'finished'"),
        (["status", "--since", "soon"], "alice", 2, "--since: expected a time back from now"),
        (["status", "--all", "--since", "2d"], "alice", 2, "--all and --since do not go"),
        (["status"], "not-a-token", 4, "set ELASTIC_GPU_TOKEN to a token of the server"),
    ]
    for argv, user, code, message in cases:
        res = cli(url, tokens.get(user, user), *argv)
        assert (res.returncode, res.stdout) == (code, ""), (argv, res.stderr)
        assert res.stderr.startswith(f"jupyter-elastic-gpu {argv[0]}: error: "), res.stderr
        assert message in res.stderr and res.stderr.count("\n") == 1, (argv, res.stderr)
    res = cli(url, tokens["ops"], "status", "--user", "alice", "--all")
    assert res.returncode == 0 and made["a1"] in res.stdout and made["b1"] not in res.stdout

    # keep: printed, shown in the job, refused for a body that is not a boolean
    res = cli(url, tokens["alice"], "keep", made["a1"])
    assert (res.returncode, res.stdout) == (0, "kept\n"), res.stderr
    assert call("GET", url + f"jobs/{made['a1']}", tokens["alice"])[1]["kept"] is True
    res = cli(url, tokens["alice"], "keep", "--off", made["a1"])
    assert (res.returncode, res.stdout) == (0, "not kept\n"), res.stderr
    code, doc = call("POST", url + f"jobs/{made['a1']}/keep", tokens["alice"], {"kept": "yes"})
    assert code == 400 and "kept" in doc["message"]
    # a user's server says which expired dirs it removed: a bad body is refused
    code, doc = call("POST", url + "launches/removed", tokens["alice"], {"jobs": "j-1"})
    assert code == 400
    code, doc = call("POST", url + "launches/removed", tokens["alice"], {"jobs": ["j-1"]})
    assert (code, doc) == (200, {"jobs": ["j-1"]})


def test_a_users_server_forwards_the_filters_and_keep_to_the_shared_scheduler(daemon, user_server):
    d, tokens = daemon
    server = user_server("alice")
    code, job = call("POST", server.api_url + "jobs", server.token, synthetic("a"))
    assert code == 201, job
    assert call("POST", server.api_url + f"jobs/{job['id']}/cancel", server.token, {})[0] == 202
    code, doc = call("GET", server.api_url + "jobs?state=cancelled&all=true", server.token)
    assert code == 200 and [j["id"] for j in doc["jobs"]] == [job["id"]]
    code, doc = call("GET", server.api_url + "status?user=bob", server.token)
    assert code == 403 and "only admins may list the jobs of another user" in doc["message"]
    code, doc = call("GET", server.api_url + "jobs?state=nope", server.token)
    assert code == 400 and "unknown state 'nope'" in doc["message"]
    code, kept = call(
        "POST", server.api_url + f"jobs/{job['id']}/keep", server.token, {"kept": True}
    )
    assert code == 200 and kept["kept"] is True
    assert call("GET", d.api_url + f"jobs/{job['id']}", tokens["alice"])[1]["kept"] is True
