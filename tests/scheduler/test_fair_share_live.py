"""Fair share in the live scheduler: weights from groups, usage accounted and kept, the two
admin routes; first the service itself on a real database, then a real shared daemon with two
users' real servers running synthetic jobs."""

from __future__ import annotations

import contextlib
import time

import pytest
from elastic_gpu_sidecar.protocol import JobState
from servers import RecordingLauncher, call, get_json, wait_for

from jupyter_elastic_gpu.errors import BadRequest, Forbidden
from jupyter_elastic_gpu.models import SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.shares import GROUP_WEIGHTS, SAVE_EVERY_S
from jupyter_elastic_gpu.scheduler.storage.store import Store

ALICE = Principal("alice", groups=("staff", "lab"))
BOB = Principal("bob", groups=("students",))
ADMIN = Principal("ops", admin=True)
READER = Principal("auditor", reads_all=True)


@contextlib.asynccontextmanager
async def service(tmp_path, gpus: int = 4, **settings):
    store = await Store.open(str(tmp_path / "scheduler.sqlite"))
    svc = SchedulerService(
        store,
        SimulatedInventory(gpus),
        RecordingLauncher(),
        lambda j: "",
        job_root=str(tmp_path / "jobs"),
        **settings,
    )
    try:
        # Loaded as a service starts (jobs, weights, usage), then driven step by step here.
        await svc.start()
        await svc.stop()
        yield svc
    finally:
        await svc.stop()
        await store.close()


def synthetic(min_gpus=1, max_gpus=4, work=1e9) -> SubmitRequest:
    body = {
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": work, "throughput": {"1": 10, "2": 19, "4": 36}},
    }
    return parse(SubmitRequest, body, "job")


async def confirm(svc: SchedulerService) -> None:
    """Heartbeat for every job as its sidecar would once it runs on its grant."""
    for job in list(svc.jobs.values()):
        if job.state in (JobState.STARTING, JobState.RESIZING):
            secret = svc.launcher.secrets[job.id]
            beat = {"generation": job.desired.generation, "gpus": job.desired.gpus}
            await svc.heartbeat(job.id, secret, {**beat, "state": "running"})


def held(svc: SchedulerService) -> dict[str, int]:
    out: dict[str, int] = {}
    for job in svc.jobs.values():
        if job.state.active:
            out[job.user] = out.get(job.user, 0) + len(job.desired.gpus)
    return out


async def test_group_weights_from_config_decide_the_split_and_the_report_shows_them(tmp_path):
    async with service(tmp_path, group_weights={"staff": 3.0, "lab": 2.0}) as svc:
        a = await svc.submit(ALICE, synthetic())
        b = await svc.submit(BOB, synthetic())
        assert a.groups == ["lab", "staff"]  # recorded with the job
        await svc.step(time.time())
        assert held(svc) == {"alice": 3, "bob": 1}
        await confirm(svc)
        await svc.step(time.time())
        assert b.reason == (
            "running on 1 of up to 4 GPUs: fair share: bob's share now is 1 of 4 GPUs "
            "(weight 1 of 4)"
        )

        report = svc.share_report(ADMIN)
        read = svc.share_report(READER)  # usage moves on between the two: not compared
        assert [u["entitled_gpus"] for u in read["users"]] == [3, 1]
        users = {u["user"]: u for u in report["users"]}
        assert users["alice"]["weight"] == 3.0 and users["alice"]["entitled_gpus"] == 3
        assert users["alice"]["share"] == pytest.approx(0.75)
        assert users["bob"]["groups"] == ["students"] and users["bob"]["weight"] == 1.0
        groups = {g["group"]: g for g in report["groups"]}
        assert groups["staff"]["users"] == ["alice"] and groups["staff"]["gpus"] == 3
        assert groups["students"]["weight"] == 1.0
        assert report["gpus"] == 4 and report["half_life_s"] == 7 * 86400
        with pytest.raises(Forbidden):
            svc.share_report(BOB)


async def test_usage_is_accounted_saved_at_most_once_a_minute_and_on_stop(tmp_path):
    async with service(tmp_path, fair_share_half_life=3600.0) as svc:
        start = time.time()  # after the service's own start and stop, which account up to then
        await svc.submit(ALICE, synthetic(max_gpus=4))
        await svc.step(start)
        assert held(svc) == {"alice": 4}
        await svc.step(start + 10.0)
        assert svc.shares.usage["alice"] == pytest.approx(40.0, rel=0.01)
        assert await svc.store.usage() == {}  # not yet: at most once a minute
        await svc.step(start + SAVE_EVERY_S + 1.0)
        saved = (await svc.store.usage())["alice"]
        assert saved[0] == pytest.approx(4 * (SAVE_EVERY_S + 1.0), rel=0.01)
        await svc.step(start + SAVE_EVERY_S + 5.0)
    # Stopping saved the last few seconds too; a new service reads it back, decayed to now.
    async with service(tmp_path, fair_share_half_life=3600.0) as again:
        gpu_s = again.shares.usage["alice"]
        assert 4 * (SAVE_EVERY_S + 1.0) < gpu_s <= 4 * (SAVE_EVERY_S + 5.0)
        # The job was kept too, and its groups with it.
        assert again.shares.groups["alice"] == ("lab", "staff")


async def test_an_admin_sets_a_group_weight_that_persists_and_counts_at_once(tmp_path):
    async with service(tmp_path) as svc:
        await svc.submit(ALICE, synthetic())
        await svc.submit(BOB, synthetic())
        await svc.step(time.time())
        assert held(svc) == {"alice": 2, "bob": 2}
        await confirm(svc)
        report = await svc.set_group_weight(ADMIN, "students", {"weight": 3})
        assert {g["group"]: g["weight"] for g in report["groups"]}["students"] == 3.0
        assert (await svc.store.settings())[GROUP_WEIGHTS] == {"students": 3.0}
        for bad in ({"weight": 0}, {"weight": 1001}, {"weight": "2"}, {"weight": True}, {}, []):
            with pytest.raises(BadRequest):
                await svc.set_group_weight(ADMIN, "students", bad)
        with pytest.raises(BadRequest):
            await svc.set_group_weight(ADMIN, "x" * 300, {"weight": 2})
        with pytest.raises(Forbidden):
            await svc.set_group_weight(READER, "staff", {"weight": 2})
        assert (await svc.store.settings())[GROUP_WEIGHTS] == {"students": 3.0}
        # bob's elastic job grows to 3 as alice's shrinks to 1, once the policy lets a job
        # just resized grow again (until then alice's job keeps the GPU bob cannot use yet).
        await svc.step(time.time() + 120)
        assert held(svc) == {"alice": 1, "bob": 3}
    async with service(tmp_path, group_weights={"students": 0.5}) as again:
        # An admin's weight overrides the configured one, across a restart.
        assert again.shares.weight("bob") == 3.0


async def test_fair_share_off_leaves_the_policy_alone(tmp_path):
    async with service(tmp_path, fair_share=False) as svc:
        first = await svc.submit(ALICE, synthetic())
        await svc.step(time.time())
        await svc.submit(BOB, synthetic())
        await svc.step(time.time())
        assert first.state == JobState.STARTING
        assert "fair share" not in " ".join(j.reason for j in svc.jobs.values())


def test_bad_settings_are_refused_with_the_setting_named(tmp_path):
    with pytest.raises(Exception, match="group_weights"):
        SchedulerService(None, None, RecordingLauncher(), str, group_weights={"staff": 0})
    with pytest.raises(Exception, match="fair_share_half_life"):
        SchedulerService(None, None, RecordingLauncher(), str, fair_share_half_life=0)


# -- a real daemon, two users' real servers, synthetic jobs -------------------------------------


def synthetic_body(name: str) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 4,
        "synthetic": {"work": 1e9, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
    }


def test_a_second_user_gets_their_share_from_the_first_through_elastic_shrink(daemon, user_server):
    d, tokens = daemon
    servers = {user: user_server(user) for user in ("alice", "bob")}
    alice, bob = servers["alice"], servers["bob"]

    def jobs_of(user):
        listing = get_json(d.api_url + "jobs", tokens["ops"])["jobs"]
        return [j for j in listing if j["user"] == user and j["state"] not in ("cancelled",)]

    def holding(user):
        return sum(len(j["gpus"]) for j in jobs_of(user) if j["state"] == "running")

    ids = []
    for name in ("a1", "a2"):
        code, job = call("POST", alice.api_url + "jobs", alice.token, synthetic_body(name))
        assert code == 201, job
        ids.append(job["id"])
    wait_for(lambda: holding("alice") == 4, 60, what="alice's jobs to run on all 4 GPUs")
    before = {j["id"] for j in jobs_of("alice") if j["gpus"]}

    code, job = call("POST", bob.api_url + "jobs", bob.token, synthetic_body("b1"))
    assert code == 201, job
    ids.append(job["id"])
    # Bob's share is taken back from alice's running jobs by shrinking them, not by waiting.
    wait_for(
        lambda: holding("bob") == 2 and holding("alice") == 2,
        60,
        what="bob to hold 2 GPUs and alice 2",
    )
    # Shrunk, not suspended: the jobs that held the GPUs still run.
    assert all(j["state"] == "running" for j in jobs_of("alice") if j["id"] in before)
    reasons = [get_json(d.api_url + f"jobs/{i}", tokens["ops"])["reason"] for i in ids[:2]]
    assert any("fair share: alice's share now is 2 of 4 GPUs" in r for r in reasons), reasons

    code, report = call("GET", d.api_url + "admin/shares", tokens["ops"])
    assert code == 200, report
    users = {u["user"]: u for u in report["users"]}
    assert users["alice"]["entitled_gpus"] == users["bob"]["entitled_gpus"] == 2
    assert users["alice"]["usage_gpu_s"] > 0 and users["alice"]["ratio"] > 1.0
    # Through a user's own server as at the daemon: for admins only.
    assert call("GET", alice.api_url + "admin/shares", alice.token)[0] == 403
    assert call("GET", d.api_url + "admin/shares", tokens["bob"])[0] == 403
    path = "admin/groups/students/weight"
    assert call("PUT", d.api_url + path, tokens["alice"], {"weight": 2})[0] == 403
    code, error = call("PUT", d.api_url + path, tokens["ops"], {"weight": -1})
    assert code == 400 and "weight" in error["message"]
    code, report = call("PUT", d.api_url + path, tokens["ops"], {"weight": 2})
    assert (
        code == 200
        and {"group": "students", "weight": 2.0, "users": [], "gpus": 0, "usage_fraction": 0.0}
        in report["groups"]
    )

    for job_id in ids:
        call("POST", d.api_url + f"jobs/{job_id}/cancel", tokens["ops"], {})
    wait_for(
        lambda: not any(j["gpus"] for j in jobs_of("alice") + jobs_of("bob")),
        60,
        what="the jobs to stop",
    )
    # A restarted daemon keeps the usage and the admin's weight.
    d.stop()
    d.start()
    code, report = call("GET", d.api_url + "admin/shares", tokens["ops"])
    assert code == 200
    users = {u["user"]: u for u in report["users"]}
    assert users["alice"]["usage_gpu_s"] > 0 and users["bob"]["usage_gpu_s"] > 0
    assert {g["group"]: g["weight"] for g in report["groups"]}["students"] == 2.0
