"""A real Jupyter server on a simulated mixed inventory (2 A100 and 2 T4): each job runs on one
kind of GPU, two jobs run side by side on the two kinds, and a job that no single kind can hold
is refused at submission with the kinds there are."""

from __future__ import annotations

import json

import pytest
from apikit import api, until
from apikit import synthetic_job as synthetic
from tornado.httpclient import HTTPClientError

pytestmark = pytest.mark.slow

KINDS = "2xA100-80GB,2xT4"


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ElasticGPUApp"]["simulated_gpus"] = KINDS
    return jp_server_config


def said(name: str, speeds: dict, gpus: int) -> dict:
    """A synthetic job of ``gpus`` GPUs whose speed per kind its submitter says."""
    body = synthetic(name, gpus, gpus)
    body["synthetic"]["kind_speed"] = speeds
    return body


async def running(jp_fetch, *ids):
    jobs = [await api(jp_fetch, f"jobs/{i}") for i in ids]
    for job in jobs:
        assert job["state"] not in ("failed", "cancelled", "done"), job["reason"]
    return jobs if all(j["state"] == "running" and j["gpus"] for j in jobs) else None


async def test_each_job_runs_on_one_kind_and_two_kinds_serve_two_jobs(jp_fetch):
    kind = {g["id"]: g["kind"] for g in (await api(jp_fetch, "gpus"))["gpus"]}
    assert sorted(kind.values()) == ["A100-80GB", "A100-80GB", "T4", "T4"]

    with pytest.raises(HTTPClientError) as refused:
        await api(jp_fetch, "jobs", "POST", synthetic("wide", 3, 4))
    assert refused.value.code == 400
    said = json.loads(refused.value.response.body)["message"]
    assert "min_gpus (3) is more than the 2 GPUs of one kind on one server" in said
    assert "here: 2 A100-80GB, 2 T4" in said
    assert not (await api(jp_fetch, "jobs"))["jobs"]  # nothing was kept

    a = await api(jp_fetch, "jobs", "POST", synthetic("A", 1, 4))
    assert a["max_gpus"] == 2
    assert any("max_gpus 4 lowered to the 2 GPUs of one kind" in n for n in a["notes"])
    [a] = await until(lambda: running(jp_fetch, a["id"]), 120, "A running")
    assert len(a["gpus"]) == 2 and len({kind[g] for g in a["gpus"]}) == 1

    b = await api(jp_fetch, "jobs", "POST", synthetic("B", 2, 2))

    async def side_by_side():
        jobs = await running(jp_fetch, a["id"], b["id"])
        if jobs and all(len(j["gpus"]) == 2 for j in jobs):
            return jobs
        return None

    a, b = await until(side_by_side, 120, "A and B running side by side")
    kinds = [{kind[g] for g in j["gpus"]} for j in (a, b)]
    assert all(len(k) == 1 for k in kinds) and kinds[0] != kinds[1]
    for job in (a, b):
        await api(jp_fetch, f"jobs/{job['id']}/cancel", "POST", {})


async def test_a_job_whose_free_gpus_are_of_two_kinds_says_so_while_it_waits(jp_fetch):
    """1 A100 and 1 T4 free: a 2-GPU job waits, and says why (the policy counts GPUs, not kinds
    yet: the grant it gives is cut to one kind, below the job's minimum)."""
    kind = {g["id"]: g["kind"] for g in (await api(jp_fetch, "gpus"))["gpus"]}
    jobs = {}
    for name in "ABCD":  # one at a time: A, B fill the A100s, C, D the T4s (tightest fit)
        jobs[name] = await api(jp_fetch, "jobs", "POST", synthetic(name, 1, 1))
        await until(lambda j=jobs[name]: running(jp_fetch, j["id"]), 120, f"{name} running")
    for name in "BD":
        await api(jp_fetch, f"jobs/{jobs[name]['id']}/cancel", "POST", {})

    async def two_kinds_free():
        gpus = (await api(jp_fetch, "gpus"))["gpus"]
        free = sorted(kind[g["id"]] for g in gpus if not g["holder"])
        return free if free == ["A100-80GB", "T4"] else None

    await until(two_kinds_free, 120, "B and D cancelled, one GPU of each kind free")
    e = await api(jp_fetch, "jobs", "POST", synthetic("E", 2, 2))

    async def told():
        job = await api(jp_fetch, f"jobs/{e['id']}")
        return job if job["reason_kind"] == "spread" else None

    job = await until(told, 60, "E's reason")
    assert job["state"] == "queued"
    assert job["reason"] == (
        "queued: needs 2 GPUs of one kind on one server: 2 free, at most 1 together "
        "(1 A100-80GB, 1 T4)"
    )
    # a job after E in the queue (longer: the policy serves E first) is not kept off the GPUs
    # E cannot use: the policy decides again without E, and F starts on one of them
    f = await api(jp_fetch, "jobs", "POST", synthetic("F", 1, 1, work=1e11))
    [f] = await until(lambda: running(jp_fetch, f["id"]), 120, "F running beside A and C")
    assert (await api(jp_fetch, f"jobs/{e['id']}"))["state"] == "queued"
    for j in (jobs["A"], jobs["C"], e, f):
        await api(jp_fetch, f"jobs/{j['id']}/cancel", "POST", {})


async def test_the_kind_a_job_goes_faster_on_is_the_one_it_gets(jp_fetch):
    """Placement by value: with one A100 and two T4s free, a job said to go three times faster
    on a T4 gets a T4 (fit alone would give it the lone A100), and one said to go four times
    faster on an A100 gets the A100; each measures its speed on the kind it runs on."""
    kind = {g["id"]: g["kind"] for g in (await api(jp_fetch, "gpus"))["gpus"]}
    a = await api(jp_fetch, "jobs", "POST", synthetic("A", 1, 1))
    [a] = await until(lambda: running(jp_fetch, a["id"]), 120, "A running")
    assert kind[a["gpus"][0]] == "A100-80GB"  # the tightest fit: both kinds have 2 free

    t = await api(jp_fetch, "jobs", "POST", said("T", {"T4": 3, "A100-80GB": 1}, 1))
    [t] = await until(lambda: running(jp_fetch, t["id"]), 120, "T running")
    assert kind[t["gpus"][0]] == "T4"
    f = await api(jp_fetch, "jobs", "POST", said("F", {"A100-80GB": 4, "T4": 1}, 1))
    [f] = await until(lambda: running(jp_fetch, f["id"]), 120, "F running")
    assert kind[f["gpus"][0]] == "A100-80GB"

    async def measured():
        job = await api(jp_fetch, f"jobs/{f['id']}")
        return job if job["throughput_by_kind"] else None

    job = await until(measured, 120, "F's speed on the A100")
    assert set(job["throughput_by_kind"]) == {"A100-80GB"}
    assert job["throughput_by_kind"]["A100-80GB"]["1"] > 0
    for j in (a, t, f):
        await api(jp_fetch, f"jobs/{j['id']}/cancel", "POST", {})


async def test_a_job_moves_to_the_fast_kind_when_it_frees_up_and_goes_on_from_its_step(jp_fetch):
    """A job four times faster on an A100 starts on the T4s (another job holds the A100s);
    when that one ends it moves to the A100s (a checkpoint and a restart there) and goes on
    from the step it had reached."""
    kind = {g["id"]: g["kind"] for g in (await api(jp_fetch, "gpus"))["gpus"]}

    h = await api(jp_fetch, "jobs", "POST", said("H", {"A100-80GB": 2, "T4": 1}, 2))
    [h] = await until(lambda: running(jp_fetch, h["id"]), 120, "H running")
    assert {kind[g] for g in h["gpus"]} == {"A100-80GB"}
    m = await api(jp_fetch, "jobs", "POST", said("M", {"A100-80GB": 4, "T4": 1}, 2))

    async def trained_on_t4():
        [job] = await running(jp_fetch, m["id"]) or [None]
        return job if job and job["progress"] and job["progress"]["global_step"] > 0 else None

    job = await until(trained_on_t4, 120, "M training on the T4s")
    assert {kind[g] for g in job["gpus"]} == {"T4"}
    await api(jp_fetch, f"jobs/{h['id']}/cancel", "POST", {})

    async def on_a100():
        [job] = await running(jp_fetch, m["id"]) or [None]
        if job and {kind[g] for g in job["gpus"]} == {"A100-80GB"} and job["progress"]:
            return job
        return None

    await until(on_a100, 180, "M moved to the A100s")
    history = (await api(jp_fetch, f"jobs/{m['id']}"))["history"]
    kinds = [{kind[g] for g in entry["gpus"]} for entry in history if entry["gpus"]]
    assert kinds[0] == {"T4"} and kinds[-1] == {"A100-80GB"}
    records = (await api(jp_fetch, f"jobs/{m['id']}/progress"))["progress"]
    steps = [r["global_step"] for r in records]
    assert steps == sorted(steps), "a step went back across the move"
    await api(jp_fetch, f"jobs/{m['id']}/cancel", "POST", {})
