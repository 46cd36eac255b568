"""The admin actions against real servers: suspend and resume, priorities, drained GPUs, who
may do each, what bad input gets, and what a restart keeps; the admin page's refusals.

An embedded server whose user is in ``admin_users`` is an admin; the shared scheduler's
tokens give an admin and two plain users, so that one user's job can be acted on by another.
Jobs are synthetic (no TensorFlow) and run through the real sidecar.
"""

from __future__ import annotations

import getpass
import json
import urllib.error
import urllib.request

import pytest
from elastic_gpu_sidecar.protocol import Grant, GrantAction, JobState
from openapi_check import response_pointer, validate
from servers import DaemonProcess, call, free_port, get_json, wait_for

from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.core.reason_kinds import ReasonKind
from jupyter_elastic_gpu.core.reasons import Told
from jupyter_elastic_gpu.core.schedule import decide
from jupyter_elastic_gpu.models import SubmitRequest
from jupyter_elastic_gpu.scheduler import snapshot
from jupyter_elastic_gpu.scheduler.execution.inventory import GpuInfo
from jupyter_elastic_gpu.scheduler.jobs import JobRecord
from jupyter_elastic_gpu.server import admin_page

GPUS = ["0", "1", "2", "3"]
#: This test's user as the server's admin (``c.ElasticGPUApp.admin_users``).
AS_ADMIN = [f"--ElasticGPUApp.admin_users={getpass.getuser()}"]


def gpu(gpu_id: str, node: str) -> GpuInfo:
    """A simulated GPU as the inventory reports it."""
    return GpuInfo(gpu_id, 0, node, "Simulated GPU", None, None, None, None)


def synthetic(name: str, min_gpus: int, max_gpus: int, work: float = 1e9) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
    }


# -- the page's document, without a server -----------------------------------------------------


def test_the_page_inlines_its_built_script_and_its_config():
    page = admin_page.admin_document({"api": "/x/", "user": "o'hara"})
    assert page is not None, admin_page.NOT_BUILT
    assert admin_page.asset(admin_page.SCRIPT) in page
    assert (
        'data-config="{&quot;api&quot;: &quot;/x/&quot;, &quot;user&quot;: &quot;o&#x27;hara'
        in page
    )


def test_a_checkout_that_has_not_built_the_script_is_told_how(monkeypatch):
    monkeypatch.setattr(admin_page, "SCRIPT", "never-built.js")
    assert admin_page.admin_document({"api": "/x/"}) is None
    assert "jlpm build" in admin_page.NOT_BUILT


# -- the record and the snapshot, without a server ---------------------------------------------


def record(job_id: str, user: str = "ann", held_by: str | None = None) -> JobRecord:
    spec = SubmitRequest.model_validate(synthetic(job_id, 1, 2))
    return JobRecord(id=job_id, user=user, name=job_id, spec=spec, job_dir="/x", held_by=held_by)


def test_a_hold_round_trips_through_the_store_format():
    job = record("j-1", held_by="ops")
    again = JobRecord.from_dict(json.loads(json.dumps(job.to_dict())))
    assert again.held and again.held_by == "ops"
    older = job.to_dict()
    del older["held_by"]  # a record saved before holds existed
    assert not JobRecord.from_dict(older).held


def test_held_jobs_and_drained_gpus_are_not_offered_to_the_policy():
    free, held = record("j-free"), record("j-held", held_by="ann")
    gpus = [gpu(g, "box") for g in GPUS]
    snap = snapshot.build([free, held], gpus, {}, 1.0, drained={"2"})
    assert [j.id for j in snap.jobs] == ["j-free"]
    assert [g.id for g in snap.usable_gpus] == ["0", "1", "3"]
    snapshot.account([free, held], 10.0)
    assert free.queued_s == 10.0 and held.queued_s == 0.0  # a hold does not age a job
    policy_said = Told(ReasonKind.CROWDED, {"gpus": 1, "top": 2})
    assert str(snapshot.shown_reason(held, policy_said)).startswith(
        "suspended by ann: it gets no GPUs until resumed (POST jobs/j-held/resume)"
    )
    by_admin = record("j-2", held_by="ops")
    assert "by ops (an admin): it gets no GPUs until an admin resumes it" in (
        str(snapshot.shown_reason(by_admin, policy_said))
    )
    by_admin.state = JobState.STOPPING  # still checkpointing: kept in the snapshot, pinned
    assert [j.id for j in snapshot.build([by_admin], gpus, {}, 1.0).jobs] == ["j-2"]


def test_a_grant_on_a_lost_node_does_not_push_a_job_off_the_gpus_left():
    """A job asked to stop on a node that then left the inventory still shows its grant
    until its sidecar is declared lost; the job running on the node left keeps its GPUs."""
    left = [gpu(f"b:{i}", "b") for i in range(2)]  # node "a" is gone
    running, stopping = record("j-run"), record("j-stop")
    running.state, running.desired = JobState.RUNNING, Grant(1, ["b:0", "b:1"], GrantAction.RUN)
    stopping.state, stopping.desired = JobState.STOPPING, Grant(2, [], GrantAction.STOP)
    stopping.reported = stopping.reported.model_copy(update={"gpus": ["a:0", "a:1"]})
    snap = snapshot.build([running, stopping], left, {}, 1.0)
    jobs = {j.id: j for j in snap.jobs}
    assert jobs["j-stop"].gpus == () and jobs["j-stop"].pinned
    assert jobs["j-run"].gpus == ("b:0", "b:1")
    for name in ("adaptive", "static", "optimus"):
        decision = decide(make_policy(name), snap, 100.0)
        assert decision.allocations["j-run"] == ("b:0", "b:1"), name
        assert decision.allocations["j-stop"] == (), name

    # a job stopping on a GPU that turned busy (another's process) is never moved: the usable
    # GPUs left are all a 2-GPU job needs
    gpus = [gpu(g, "box") for g in ["0", "1", "2"]]
    stopping.reported = stopping.reported.model_copy(update={"gpus": ["0"]})
    new = JobRecord(
        id="j-new",
        user="ann",
        name="j-new",
        spec=SubmitRequest.model_validate(synthetic("j-new", 2, 2)),
        job_dir="/x",
    )
    snap = snapshot.build([stopping, new], gpus, {"0": [object()]}, 1.0)
    for name in ("adaptive", "static", "optimus"):
        decision = decide(make_policy(name), snap, 100.0)
        assert decision.allocations["j-new"] == ("1", "2"), name


def test_gpus_a_stopping_job_leaves_to_a_starting_one_are_held_once():
    """Two 1-GPU jobs were suspended for a 2-GPU one, which starts on their GPUs once they
    are given back: one has given its GPU back, the other still checkpoints. The GPU it
    still runs on is the starting job's already (its launch waits for it); counted for both,
    the policy saw 5 GPUs held of 4 and placed the starting one elsewhere, across nodes, on
    GPUs of a running job (the conformance test caught the two suspended jobs resuming where
    they were, for nothing)."""
    gpus = [gpu(f"{n}:{i}", n) for n in ("b", "c") for i in (0, 1)]

    def job(job_id: str, lo: int, state: JobState, desired: list[str]) -> JobRecord:
        r = JobRecord(
            id=job_id,
            user="ann",
            name=job_id,
            spec=SubmitRequest.model_validate(synthetic(job_id, lo, lo)),
            job_dir="/x",
        )
        r.state, r.desired, r.started_at = state, Grant(1, desired, GrantAction.RUN), 1.0
        return r

    running = job("j-run", 2, JobState.RUNNING, ["b:0", "b:1"])
    stopping = job("j-stop", 1, JobState.STOPPING, [])
    stopping.desired = Grant(2, [], GrantAction.STOP)
    stopping.reported = stopping.reported.model_copy(update={"gpus": ["c:1"]})
    suspended = job("j-gone", 1, JobState.QUEUED, [])
    starting = job("j-start", 2, JobState.STARTING, ["c:0", "c:1"])
    starting.started_at = None
    snap = snapshot.build([running, stopping, suspended, starting], gpus, {}, 1.0)
    held = {j.id: j.gpus for j in snap.jobs}
    assert held == {
        "j-run": ("b:0", "b:1"),
        "j-stop": (),
        "j-gone": (),
        "j-start": ("c:0", "c:1"),
    }
    for name in ("adaptive", "static", "optimus", "tiresias"):
        allocations = decide(make_policy(name), snap, 100.0).allocations
        assert allocations["j-start"] == ("c:0", "c:1"), (name, allocations)
        assert allocations["j-stop"] == (), (name, allocations)
        given = [g for gpus in allocations.values() for g in gpus]
        assert len(given) == len(set(given)) <= 4, (name, allocations)


# -- against real servers ------------------------------------------------------------------------


class Api:
    """One server's API as one user; every answer is checked against openapi.yaml."""

    def __init__(self, root: str, token: str) -> None:
        self.root, self.token = root, token

    def __call__(self, method: str, path: str, body=None, template: str | None = None):
        code, payload = call(method, self.root + path, self.token, body)
        if template is not None:
            validate(payload, response_pointer(template, method.lower(), code))
        return code, payload

    def job(self, job_id: str) -> dict:
        return get_json(self.root + f"jobs/{job_id}", self.token)

    def gpus(self) -> dict[str, dict]:
        return {g["id"]: g for g in get_json(self.root + "gpus", self.token)["gpus"]}

    def events(self, job_id: str) -> list[dict]:
        return get_json(self.root + f"jobs/{job_id}/events", self.token)["events"]

    def submit(self, body: dict) -> dict:
        code, job = self("POST", "jobs", body)
        assert code == 201, job
        return job

    def suspend(self, job_id: str):
        return self("POST", f"jobs/{job_id}/suspend", {}, "/jobs/{job_id}/suspend")

    def resume(self, job_id: str):
        return self("POST", f"jobs/{job_id}/resume", {}, "/jobs/{job_id}/resume")

    def priority(self, job_id: str, body):
        return self("POST", f"jobs/{job_id}/priority", body, "/jobs/{job_id}/priority")

    def drain(self, gpu_id: str, body):
        return self("POST", f"gpus/{gpu_id}/drain", body, "/gpus/{gpu_id}/drain")

    def running(self, job_id: str, gpus: int | None = None) -> dict | None:
        """The job once it runs (on ``gpus`` GPUs) and has reported progress."""
        j = self.job(job_id)
        ok = j["state"] == "running" and (j["progress"] or {}).get("samples")
        return j if ok and (gpus is None or len(j["gpus"]) == gpus) else None


def page(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=15) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def admin(server_process):
    """A server whose user is an admin (``c.ElasticGPUApp.admin_users``)."""
    server = server_process(port=free_port(), extra_args=AS_ADMIN)
    return server, Api(server.api_url, server.token)


def test_suspend_holds_a_running_job_until_it_is_resumed(admin):
    _, api = admin
    job = api.submit(synthetic("long", 1, 2))
    wait_for(lambda: api.running(job["id"]), 40, what="the job to run")

    code, held = api.suspend(job["id"])
    assert code == 202 and held["held"] and held["state"] in ("stopping", "queued"), held

    def waiting():  # its sidecar checkpointed and stopped
        j = api.job(job["id"])
        return j if j["state"] == "queued" and not j["gpus"] else None

    held = wait_for(waiting, 30, what="the suspended job to checkpoint and stop")
    assert held["held"]
    assert f"suspended by {getpass.getuser()}" in held["reason"] and "resume" in held["reason"]
    suspended_at = held["progress"]["samples"]
    assert api.suspend(job["id"])[0] == 202  # again: nothing changes

    # Decisions go on without it: a job that could share the GPUs gets all four.
    other = api.submit(synthetic("other", 1, 4))
    wait_for(lambda: api.running(other["id"], gpus=4), 40, what="the other job to take 4 GPUs")
    assert api.job(job["id"])["state"] == "queued" and api.job(job["id"])["held"]
    assert api("POST", f"jobs/{other['id']}/cancel", {})[0] == 202

    code, resumed = api.resume(job["id"])
    assert code == 200 and not resumed["held"]
    again = wait_for(
        lambda: (j := api.running(job["id"])) and j["progress"]["samples"] > suspended_at and j,
        40,
        what="the resumed job to run again past where it stopped",
    )
    assert not again["held"] and again["started_at"] == held["started_at"]
    kinds = [e["kind"] for e in api.events(job["id"])]
    assert kinds.index("hold") < kinds.index("suspended") < kinds.index("release")
    assert "resumed" in kinds[kinds.index("release") :]
    code, same = api.resume(job["id"])  # not held: unchanged
    assert code == 200 and not same["held"] and kinds == [e["kind"] for e in api.events(job["id"])]


def test_a_drained_gpu_loses_its_job_and_gets_no_new_one(admin):
    _, api = admin
    job = api.submit(synthetic("one-gpu", 1, 1))
    first = wait_for(lambda: api.running(job["id"]), 40, what="the job to run")
    (gpu,) = first["gpus"]

    code, view = api.drain(gpu, {"drained": True})
    assert code == 200 and view["id"] == gpu and view["drained"]
    moved = wait_for(
        lambda: (j := api.running(job["id"])) and j["gpus"] != [gpu] and j,
        40,
        what="the job to move off the drained GPU",
    )
    assert gpu not in moved["gpus"]
    gpus = api.gpus()
    assert gpus[gpu]["drained"] and gpus[gpu]["holder"] is None
    assert [g for g, v in gpus.items() if v["drained"]] == [gpu]
    resize = [e for e in api.events(job["id"]) if e["kind"] == "resize"]
    assert resize and resize[-1]["data"]["from"] == [gpu]

    # Every other GPU drained too: nothing is left for a new job, which waits.
    for other in GPUS:
        assert api.drain(other, {"drained": True})[0] == 200
    late = api.submit(synthetic("late", 1, 4))
    wait_for(lambda: api.job(job["id"])["state"] == "queued", 40, what="the job to be suspended")
    assert api.job(late["id"])["state"] == "queued" and not any(
        g["holder"] for g in api.gpus().values()
    )

    code, view = api.drain(gpu, {"drained": False})
    assert code == 200 and not view["drained"]
    wait_for(lambda: api.running(late["id"]) or api.running(job["id"]), 40, what="a job on it")


def test_priorities_change_and_are_told(admin):
    _, api = admin
    for gpu in GPUS:  # nothing runs: the job waits, the test is about its record
        api.drain(gpu, {"drained": True})
    job = api.submit(synthetic("waits", 1, 2))
    code, changed = api.priority(job["id"], {"priority": 5})
    assert code == 200 and changed["priority"] == 5
    (event,) = [e for e in api.events(job["id"]) if e["kind"] == "priority"]
    assert event["message"] == f"{getpass.getuser()} changed the priority of waits from 1 to 5"
    assert event["data"] == {"by": getpass.getuser(), "from": 1.0, "to": 5.0}
    code, same = api.priority(job["id"], {"priority": 2.5})
    assert code == 200 and same["priority"] == 2.5


#: Bodies of a priority change that are refused, and words the refusal must contain.
BAD_PRIORITIES = [
    ({"priority": 0}, "must be above 0"),
    ({"priority": 101}, "must be at most 100"),
    ({"priority": -3}, "must be above 0"),
    ({"priority": "5"}, "must be a number"),
    ({"priority": True}, "must be a number"),
    ({"priority": None}, "must be a number"),
    ({}, "priority: is required"),
    ({"priority": 2, "colour": "red"}, "unknown field"),
    ([2], "JSON object"),
    ("2", "JSON object"),
]


def test_bad_priorities_are_refused_and_change_nothing(admin):
    """One job gets every bad body in turn (one server: a refusal that changed anything would
    show in the next one's checks too)."""
    _, api = admin
    for gpu in GPUS:
        api.drain(gpu, {"drained": True})
    job = api.submit(synthetic("waits", 1, 2))
    for body, words in BAD_PRIORITIES:
        code, error = api.priority(job["id"], body)
        assert code == 400 and words in error["message"], (body, error)
        assert api.job(job["id"])["priority"] == 1, body
    assert "priority" not in {e["kind"] for e in api.events(job["id"])}


def test_bad_actions_get_4xx_and_change_nothing(admin):
    server, api = admin
    code, error = api("POST", "jobs/j-nope/suspend", {}, "/jobs/{job_id}/suspend")
    assert code == 404 and "j-nope" in error["message"]
    assert api.resume("j-nope")[0] == 404
    assert api.priority("j-nope", {"priority": 2})[0] == 404
    code, error = api.drain("7", {"drained": True})
    assert code == 404 and "this server's GPUs are 0, 1, 2, 3" in error["message"]
    for body, words in (
        ({}, "drained: is required"),
        ({"drained": "yes"}, "must be true or false"),
        ({"drained": 1}, "must be true or false"),
        ({"drained": True, "why": "x"}, "unknown field"),
        ([True], "JSON object"),
    ):
        code, error = api.drain("0", body)
        assert code == 400 and words in error["message"], (body, error)
    code, _ = call("POST", server.api_url + "gpus/0/drain", server.token, None)
    assert code == 400  # no body at all: `drained` is required
    assert not any(g["drained"] for g in api.gpus().values())
    # A finished job: nothing to suspend, its priority no longer matters.
    for gpu in GPUS:
        api.drain(gpu, {"drained": True})
    job = api.submit(synthetic("short-lived", 1, 1))
    assert api("POST", f"jobs/{job['id']}/cancel", {})[1]["state"] == "cancelled"
    code, error = api.suspend(job["id"])
    assert code == 409 and "cancelled" in error["message"]
    assert api.priority(job["id"], {"priority": 3})[0] == 409
    code, same = api.resume(job["id"])  # not held: unchanged
    assert code == 200 and same == api.job(job["id"]) and not same["held"]


def test_a_restart_keeps_held_jobs_held_and_drained_gpus_drained(server_process):
    port, name = free_port(), "kept"
    server = server_process(port=port, name=name, extra_args=AS_ADMIN)
    api = Api(server.api_url, server.token)
    assert api.drain("3", {"drained": True})[0] == 200
    job = api.submit(synthetic("held", 1, 4))
    wait_for(lambda: api.running(job["id"]), 40, what="the job to run")
    assert api.suspend(job["id"])[0] == 202
    wait_for(lambda: api.job(job["id"])["state"] == "queued", 30, what="the job to stop")

    server.stop()
    server = server_process(port=port, name=name, extra_args=AS_ADMIN)  # same database
    api = Api(server.api_url, server.token)
    assert {g: v["drained"] for g, v in api.gpus().items()} == {
        "0": False,
        "1": False,
        "2": False,
        "3": True,
    }
    kept = api.job(job["id"])
    assert kept["held"] and kept["state"] == "queued" and "suspended by" in kept["reason"]
    other = api.submit(synthetic("other", 1, 4))
    running = wait_for(lambda: api.running(other["id"], gpus=3), 40, what="the other job")
    assert "3" not in running["gpus"] and api.job(job["id"])["state"] == "queued"
    assert api.resume(job["id"])[0] == 200
    assert api("POST", f"jobs/{other['id']}/cancel", {})[0] == 202
    wait_for(lambda: api.running(job["id"]), 40, what="the resumed job to run again")


def test_who_may_do_what_on_the_shared_scheduler(tmp_path):
    daemon = DaemonProcess(tmp_path, free_port())
    daemon.state.mkdir(parents=True)
    tokens = {u: daemon.add_user(u, admin=u == "ops") for u in ("alice", "bob", "ops")}
    daemon.start()
    try:
        alice, bob, ops = (Api(daemon.api_url, tokens[u]) for u in ("alice", "bob", "ops"))
        for gpu in GPUS:  # nothing starts: the jobs stay queued (no user's server runs them)
            code, view = ops.drain(gpu, {"drained": True})
            assert code == 200 and view["drained"]
        job = alice.submit(synthetic("alices", 1, 2))["id"]

        # Plain users: no priorities, no drains, not another user's job.
        code, error = alice.priority(job, {"priority": 9})
        assert code == 403 and "admin" in error["message"] and "alice" in error["message"]
        code, error = alice.drain("0", {"drained": False})
        assert code == 403 and "custom:elastic-gpu:admin" in error["message"]
        assert bob.suspend(job)[0] == 403 and bob.resume(job)[0] == 403
        assert alice.job(job)["priority"] == 1 and ops.gpus()["0"]["drained"]

        # Owners suspend and resume their own jobs.
        code, held = alice.suspend(job)
        assert code == 202 and held["held"] and "suspended by alice" in held["reason"]
        code, resumed = alice.resume(job)
        assert code == 200 and not resumed["held"]

        # An admin's hold is lifted by an admin only.
        code, held = ops.suspend(job)
        assert code == 202 and "suspended by ops (an admin)" in held["reason"]
        code, error = alice.resume(job)
        assert code == 403 and "ops" in error["message"], error
        assert alice.job(job)["held"]
        assert ops.priority(job, {"priority": 3})[1]["priority"] == 3
        code, resumed = ops.resume(job)
        assert code == 200 and not resumed["held"]

        # Admins see every job in full (the JupyterLab panel reads these same documents).
        entry = next(e for e in get_json(daemon.api_url + "queue", tokens["ops"])["queue"])
        assert entry["name"] == "alices" and entry["reason"]
        seen_by_bob = get_json(daemon.api_url + "queue", tokens["bob"])["queue"][0]
        assert seen_by_bob["name"] is None

        # The page: admins only; the others are told what is needed.
        url = daemon.api_url.replace("/api/", "/admin")
        code, html = page(url + f"?token={tokens['ops']}")
        assert code == 200 and "Elastic GPU admin" in html and "&quot;user&quot;: &quot;ops" in html
        code, html = page(url + f"?token={tokens['alice']}")
        assert code == 403 and "Admins only" in html and "alice is" in html
        assert "add-user NAME --admin" in html
        code, html = page(url)
        assert code == 401 and "token" in html
    finally:
        daemon.stop()


def test_a_plain_user_of_a_jupyter_server_gets_403(server_process):
    server = server_process(port=free_port())  # admin_users empty: its user is no admin
    api = Api(server.api_url, server.token)
    code, html = page(server.url + "elastic-gpu/admin", server.token)
    assert code == 403 and "Admins only" in html and "c.ElasticGPUApp.admin_users" in html
    assert api.drain("0", {"drained": True})[0] == 403
    job = api.submit(synthetic("mine", 1, 1))
    assert api.priority(job["id"], {"priority": 2})[0] == 403
    assert api.suspend(job["id"])[0] == 202  # the owner may suspend their own job
    code, html = page(server.url + "elastic-gpu/admin")  # not logged in: the login page
    assert code == 200 and "login" in html.lower()
