"""The scheduler over a real local Ray cluster: its GPUs in the inventory, jobs on the nodes,
a node lost while jobs run there, a node that joins later."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import threading
from pathlib import Path

import pytest
import ray
from apikit import api, until
from servers import freeze_sidecar, is_running

from jupyter_elastic_gpu.scheduler.execution.launcher import PlaceGone
from jupyter_elastic_gpu.scheduler.execution.ray_cluster import (
    SIDECAR_ACTOR,
    RayCluster,
    RayInventory,
    RayLauncher,
    RayUnavailable,
)

pytestmark = pytest.mark.slow


def synthetic(name, work, gpus=2):
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": gpus,
        "max_gpus": gpus,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190}, "batch": 10},
    }


async def in_state(jp_fetch, states, *ids):
    """The jobs, once each is in ``states`` (one state, or a tuple of them: "running" or
    "done" for a job that has started, as a short one can end before another's sidecar starts
    on a loaded machine); any of them failed, or cancelled where that was not asked for, fails
    the test."""
    states = (states,) if isinstance(states, str) else states
    jobs = [await api(jp_fetch, f"jobs/{i}") for i in ids]
    for job in jobs:
        if job["state"] in {"failed", "cancelled"} - set(states):
            raise AssertionError(f"job {job['id']} ended: {job['reason']}")
    return jobs if all(j["state"] in states for j in jobs) else None


def node(job) -> str:
    """The node of the job's GPUs: those it holds, or its last grant's if it has ended."""
    gpus = job["gpus"] or next(h["gpus"] for h in reversed(job["history"]) if h["gpus"])
    (found,) = {g.rsplit(":", 1)[0] for g in gpus}
    return found


async def test_every_node_s_gpus_are_in_the_inventory(jp_fetch):
    gpus = (await api(jp_fetch, "gpus"))["gpus"]
    assert sorted(g["id"] for g in gpus) == [
        "127.0.0.2:0",
        "127.0.0.2:1",
        "127.0.0.3:0",
        "127.0.0.3:1",
    ]
    assert {g["node"] for g in gpus} == {"127.0.0.2", "127.0.0.3"}
    # each node's GPUs name the kind its accelerator_type resource says (a node that joins
    # without one: simulated)
    assert {(g["node"], g["kind"]) for g in gpus} == {
        ("127.0.0.2", "A100-80GB"),
        ("127.0.0.3", "T4"),
    }
    assert {g["memory_total_mb"] for g in gpus if g["kind"] == "A100-80GB"} == {80 * 1024}


async def test_a_kernel_s_gpu_lease_is_refused_with_what_to_do_instead(jp_fetch):
    """A lease could land on another machine than its kernel: refused, nothing queued."""
    from tornado.httpclient import HTTPClientError

    with pytest.raises(HTTPClientError) as refused:
        await api(jp_fetch, "leases", "POST", {"gpus": 1})
    assert refused.value.code == 409
    assert "%%elastic_train" in refused.value.response.body.decode()
    jobs = (await api(jp_fetch, "jobs"))["jobs"]
    assert not [j for j in jobs if j.get("kind") == "interactive"]


async def test_two_jobs_run_at_once_on_different_nodes(jp_fetch):
    # work without end: both must be seen running together, however long a loaded machine
    # takes to start the second (a short job could be done before it)
    a = await api(jp_fetch, "jobs", "POST", synthetic("A", 1e9))
    b = await api(jp_fetch, "jobs", "POST", synthetic("B", 1e9))
    both = await until(
        lambda: in_state(jp_fetch, "running", a["id"], b["id"]), 90, "A and B running"
    )
    assert {node(j) for j in both} == {"127.0.0.2", "127.0.0.3"}
    # each sidecar, started through Ray on its node, writes its log into the shared job dir
    for job in both:
        launch = Path(job["job_dir"]) / "sidecar.log"
        assert launch.exists()
    for job in both:
        await api(jp_fetch, f"jobs/{job['id']}/cancel", "POST", {})
    await until(
        lambda: in_state(jp_fetch, "cancelled", a["id"], b["id"]),
        60,
        "A and B cancelled",
    )

    async def no_actor_left():  # each sidecar's actor ended with it: no idle worker stays
        return not [n for n in ray.util.list_named_actors() if n.startswith(SIDECAR_ACTOR)]

    await until(no_actor_left, 30, "the sidecars' actors to end")


async def test_a_forced_cancel_ends_the_sidecar_on_its_node_and_what_it_started(jp_fetch):
    """A sidecar that answers nothing (frozen, as one hung in a checkpoint is) is ended on its
    node, trainer included, which ``ray.kill`` of its actor alone would miss."""
    a = await api(jp_fetch, "jobs", "POST", synthetic("hung", 1e9))
    await until(lambda: in_state(jp_fetch, "running", a["id"]), 90, "the job running")
    _, frozen, _, _ = await asyncio.to_thread(freeze_sidecar, a["id"])
    try:
        answer = await api(jp_fetch, f"jobs/{a['id']}/cancel", "POST", {"force": True})
        assert answer["state"] == "cancelled" and "its processes were ended" in answer["reason"]

        async def ended():
            return not any(is_running(p) for p in frozen)

        await until(ended, 30, "the sidecar and its trainer to end")

        async def no_actor_left():
            return not [n for n in ray.util.list_named_actors() if n.startswith(SIDECAR_ACTOR)]

        await until(no_actor_left, 30, "its actor to end")
    finally:
        for p in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)


async def test_a_lost_node_s_job_resumes_on_the_gpus_left(jp_fetch, ray_cluster):
    # B, the node to lose's job, has twice A's work: resumed, it is the longer job and waits
    # for A, whatever speeds the two measure (were it the shorter, the policy could rightly
    # suspend A for it, and the test could not tell that from A hit by the loss)
    a = await api(jp_fetch, "jobs", "POST", synthetic("A", 2_500))
    b = await api(jp_fetch, "jobs", "POST", synthetic("B", 5_000))
    await until(lambda: in_state(jp_fetch, "running", b["id"]), 90, "B running")
    both = await until(
        lambda: in_state(jp_fetch, ("running", "done"), a["id"], b["id"]), 90, "A started"
    )
    lost = next(j for j in both if j["id"] == b["id"])
    kept = node(next(j for j in both if j["id"] == a["id"]))
    assert kept != node(lost)

    async def checkpointed():
        return (Path(lost["job_dir"]) / "checkpoints" / "latest").exists()

    await until(checkpointed, 60, "a checkpoint of the job on the node to lose")
    ray_cluster.remove(node(lost))

    async def gone():
        ids = {g["id"] for g in (await api(jp_fetch, "gpus"))["gpus"]}
        return ids == {f"{kept}:0", f"{kept}:1"}

    await until(gone, 60, "the lost node's GPUs to leave the inventory")
    finished = await until(
        lambda: in_state(jp_fetch, "done", a["id"], b["id"]), 240, "A and B done"
    )
    assert all(j["model_path"] is None or Path(j["model_path"]).exists() for j in finished)
    resumed = next(j for j in finished if j["id"] == lost["id"])
    events = (await api(jp_fetch, f"jobs/{lost['id']}/events"))["events"]
    assert any(e["kind"] == "lost" for e in events), [e["kind"] for e in events]
    records = [
        json.loads(line)
        for line in (Path(resumed["job_dir"]) / "progress.jsonl").read_text().splitlines()
    ]
    # resumed from its checkpoint, not from the start: the second generation did not begin at 0
    firsts = [r for r in records if r.get("first")]
    assert len(firsts) >= 2 and firsts[-1]["resumed_from"] > 0
    assert {g.rsplit(":", 1)[0] for g in resumed["history"][-1]["gpus"]} == {kept}
    # the other job kept its node's GPUs throughout: it was never stopped
    other = next(j for j in finished if j["id"] != lost["id"])
    if [len(h["gpus"]) for h in other["history"]] != [2]:
        said = (await api(jp_fetch, f"jobs/{other['id']}/events"))["events"]
        raise AssertionError(f"the other job was stopped: {other['history']}; its events: {said}")


async def test_a_launch_given_up_on_leaves_no_trainer_on_its_gpus(
    jp_fetch, ray_cluster, monkeypatch
):
    """A loaded node can start a sidecar, and its trainer, just as the launch times out: the
    launcher gives the job's GPUs back (the job is queued again) only once both are gone, or
    the next job on those GPUs would share them with that trainer."""
    job_dirs, sidecars, trainers, alive_when_given_up = [], [], [], []
    real_started, real_launch = RayLauncher._started, RayLauncher.launch

    async def late(self, ref):  # the first start completes after its trainer's first step
        pid = await real_started(self, ref)
        if trainers:
            return pid
        sidecars.append(pid)
        log = Path(job_dirs[0]) / "sidecar.log"

        async def first_step():
            text = log.read_text() if log.exists() else ""
            return "first step" in text and re.search(r"trainer (\d+) started", text)

        trainers.append(int((await until(first_step, 60, "the trainer's first step"))[1]))
        raise asyncio.TimeoutError

    async def launch(self, request):
        job_dirs.append(request.job_dir)
        try:
            return await real_launch(self, request)
        except PlaceGone:
            alive_when_given_up.append((is_running(sidecars[0]), is_running(trainers[0])))
            raise

    monkeypatch.setattr(RayLauncher, "_started", late)
    monkeypatch.setattr(RayLauncher, "launch", launch)
    job = await api(jp_fetch, "jobs", "POST", synthetic("A", 600))
    await until(lambda: in_state(jp_fetch, "done", job["id"]), 120, "A done")
    assert alive_when_given_up == [(False, False)]
    events = (await api(jp_fetch, f"jobs/{job['id']}/events"))["events"]
    assert any("did not start the sidecar (TimeoutError)" in e["message"] for e in events)


async def test_a_node_that_joins_is_used(jp_fetch, ray_cluster):
    ray_cluster.remove("127.0.0.3")

    async def count(n):
        return len((await api(jp_fetch, "gpus"))["gpus"]) == n or None

    await until(lambda: count(2), 60, "2 GPUs")
    # B is the longer job: it waits for A (which runs first) while one node is all there is;
    # neither ends by itself, so B can only start on the node that joins, however long that
    # node takes to start on a loaded machine
    a = await api(jp_fetch, "jobs", "POST", synthetic("A", 1e9))
    b = await api(jp_fetch, "jobs", "POST", synthetic("B", 2e9))
    await until(lambda: in_state(jp_fetch, "running", a["id"]), 90, "A running")
    assert (await api(jp_fetch, f"jobs/{b['id']}"))["state"] == "queued"
    ray_cluster.add("127.0.0.4")
    await until(lambda: count(4), 60, "4 GPUs")
    started = await until(
        lambda: in_state(jp_fetch, "running", b["id"]), 90, "B running on the new node"
    )
    assert node(started[0]) == "127.0.0.4"
    for job in (a, b):
        await api(jp_fetch, f"jobs/{job['id']}/cancel", "POST", {})


def test_closing_waits_for_an_inventory_call_in_another_thread(ray_cluster):
    """Ray ends the whole process when a thread calls it after ``ray.shutdown()``: a server
    stopping while its inventory is read in a worker thread (the service's refresh) must wait
    for that read, and reads after it answer from the last snapshot."""
    cluster = RayCluster(ray_cluster.address, allow_insecure=True)
    inventory = RayInventory(cluster)  # as the server reads it: NVML probe actors too
    first = inventory.snapshot()
    assert len(first) == 4
    stop = threading.Event()
    answers: list[int] = []

    def read() -> None:
        while not stop.is_set():
            answers.append(len(inventory.snapshot()))

    reader = threading.Thread(target=read)
    reader.start()
    while len(answers) < 3:  # the reader is in its loop of calls to Ray
        reader.join(0.05)
    cluster.close()  # this process survives: the call in flight ends first
    stop.set()
    reader.join()
    assert set(answers) == {4}
    assert len(inventory.snapshot()) == 4  # after close: the last answer, no call to Ray


def test_closing_does_not_wait_forever_for_a_call_that_hangs(ray_cluster, monkeypatch, caplog):
    """Should a call to Ray hang in another thread (past Ray's own timeouts), the server still
    stops: closing waits a bounded time, then leaves the connection to the process's exit."""
    from jupyter_elastic_gpu.scheduler.execution import ray_cluster as module

    monkeypatch.setattr(module, "CLOSE_WAIT_S", 0.2)
    cluster = RayCluster(ray_cluster.address, allow_insecure=True)
    inventory = RayInventory(cluster)
    assert len(inventory.snapshot()) == 4
    in_call, release = threading.Event(), threading.Event()

    def hung_call() -> None:  # holds the lock as a call to Ray does
        with cluster.lock:
            in_call.set()
            release.wait()

    caller = threading.Thread(target=hung_call)
    caller.start()
    in_call.wait()
    cluster.close()
    assert cluster.closed and cluster.ray.is_initialized()
    assert "has not returned" in caplog.text
    release.set()
    caller.join()
    assert len(inventory.snapshot()) == 4  # closed: the last answer, no call to Ray
    cluster.close()  # the call is over: this one disconnects
    assert not cluster.ray.is_initialized()


def test_a_cluster_without_token_authentication_is_refused(ray_cluster):
    with pytest.raises(RayUnavailable, match="token authentication"):
        RayCluster(ray_cluster.address, allow_insecure=False)
    assert "RAY_ADDRESS" not in os.environ


async def test_users_and_trainers_never_get_the_cluster_s_address(jp_fetch, jp_serverapp):
    app = next(iter(jp_serverapp.extension_manager.extension_apps["jupyter_elastic_gpu"]))
    job = await api(jp_fetch, "jobs", "POST", synthetic("A", 3_000))
    await until(lambda: in_state(jp_fetch, "running", job["id"]), 90, "A running")
    record = app._service.jobs[job["id"]].launch
    environ = Path(f"/proc/{record['remote_pid']}/environ").read_bytes().split(b"\0")
    names = {item.split(b"=", 1)[0].decode() for item in environ if item}
    assert not {n for n in names if n.startswith("RAY_")}, names
    assert not names & {"ELASTIC_GPU_TOKEN", "JUPYTER_TOKEN", "JUPYTERHUB_API_TOKEN"}
    address = app.ray_address
    for path in ("gpus", "jobs", f"jobs/{job['id']}", "status", "whoami", "queue"):
        r = await jp_fetch("elastic-gpu", "api", *path.split("/"))
        assert address.encode() not in r.body, path
    await api(jp_fetch, f"jobs/{job['id']}/cancel", "POST", {})
