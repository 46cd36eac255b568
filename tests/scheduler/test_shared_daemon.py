"""Two users, two real Jupyter servers, one shared `jupyter elastic-gpu scheduler` daemon."""

from __future__ import annotations

import json
from pathlib import Path

from servers import call, get_json, wait_for


def synthetic(name, work):
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 2,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190}, "batch": 10},
    }


def test_two_servers_share_one_daemon(daemon, user_server):
    d, tokens = daemon
    servers = {user: user_server(user) for user in ("alice", "bob")}
    whoami = {u: get_json(s.api_url + "whoami", s.token) for u, s in servers.items()}
    assert whoami["alice"] == {"user": "alice", "admin": False, "mode": "daemon"}
    assert whoami["bob"]["user"] == "bob"
    jobs = {}
    for user, s in servers.items():
        code, job = call("POST", s.api_url + "jobs", s.token, synthetic(f"{user}-job", 3_000))
        assert code == 201, job
        assert job["user"] == user
        jobs[user] = job

    def both_done():
        states = {
            u: get_json(servers[u].api_url + f"jobs/{jobs[u]['id']}", servers[u].token)["state"]
            for u in servers
        }
        return states if set(states.values()) == {"done"} else None

    wait_for(both_done, 90, what="both users' jobs to finish")

    # Each trainer ran under its user's server; the sidecar reported to the daemon.
    for user in servers:
        job = get_json(servers[user].api_url + f"jobs/{jobs[user]['id']}", servers[user].token)
        status = json.loads((Path(job["job_dir"]) / "status.json").read_text())
        assert status["state"] == "done"

    alice = servers["alice"]
    listing = get_json(alice.api_url + "jobs", alice.token)["jobs"]
    mine = next(j for j in listing if j["id"] == jobs["alice"]["id"])
    theirs = next(j for j in listing if j["id"] == jobs["bob"]["id"])
    assert mine["name"] == "alice-job" and "job_dir" in mine
    assert set(theirs) == {"id", "user", "state", "gpus", "min_gpus", "max_gpus", "position"}
    # Alice can neither read nor cancel Bob's job, through her server or at the daemon.
    code, payload = call("GET", alice.api_url + f"jobs/{jobs['bob']['id']}", alice.token)
    assert code == 403 and "belongs to bob" in payload["message"]
    code, _ = call("POST", alice.api_url + f"jobs/{jobs['bob']['id']}/cancel", alice.token, {})
    assert code == 403
    code, _ = call("GET", d.api_url + f"jobs/{jobs['bob']['id']}/logs", tokens["alice"])
    assert code == 403
    # Without a token, or with a wrong one, the daemon answers nothing.
    assert call("GET", d.api_url + "jobs", None)[0] == 401
    assert call("GET", d.api_url + "jobs", "not-a-token")[0] == 401
    # The admin sees everything.
    code, bob_job = call("GET", d.api_url + f"jobs/{jobs['bob']['id']}", tokens["ops"])
    assert code == 200 and bob_job["name"] == "bob-job"


def test_jobs_wait_for_their_users_server(daemon, user_server):
    """A job sent straight to the shared scheduler, by a user whose own Jupyter server (which
    starts their jobs) is not running, waits and says so; it starts once that server is up."""
    d, tokens = daemon
    code, job = call("POST", d.api_url + "jobs", tokens["alice"], synthetic("early", 2_000))
    assert code == 201, job

    def waiting():
        seen = get_json(d.api_url + f"jobs/{job['id']}", tokens["alice"])
        return seen if "waiting for your server" in seen["reason"] else None

    seen = wait_for(waiting, 30, what="the job to wait for alice's server")
    assert seen["state"] == "queued" and seen["gpus"] == []
    events = get_json(d.api_url + f"jobs/{job['id']}/events", tokens["alice"])["events"]
    assert not any(e["kind"] in ("admitted", "lost", "failed") for e in events), events

    s = user_server("alice")

    def done():
        state = get_json(s.api_url + f"jobs/{job['id']}", s.token)["state"]
        return state if state == "done" else None

    wait_for(done, 90, what="the job to run once alice's server is up")
