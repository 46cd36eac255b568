"""What GET jobs lists over time (recent history), and the notebook a job records."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time

import pytest
from elastic_gpu_sidecar.protocol import JobState
from servers import RecordingLauncher
from tornado.httpclient import HTTPClientError

from jupyter_elastic_gpu.errors import BadRequest
from jupyter_elastic_gpu.models import Heartbeat, PublicJob, SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.jobs import JobRecord
from jupyter_elastic_gpu.scheduler.port import views
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.schema import MIGRATIONS, migration_scripts
from jupyter_elastic_gpu.scheduler.storage.store import Store

ANN, BOB = Principal("ann"), Principal("bob")


@contextlib.asynccontextmanager
async def service(tmp_path, **settings):
    """A scheduler on a database file (as a Jupyter server has), started as at a restart."""
    store = await Store.open(str(tmp_path / "scheduler.sqlite"))
    svc = SchedulerService(
        store, SimulatedInventory(4), RecordingLauncher(), lambda j: "", job_root=str(tmp_path)
    )
    for name, value in settings.items():
        setattr(svc, name, value)
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()
        await store.close()


def request(**extra) -> SubmitRequest:
    body = {"kind": "synthetic", "synthetic": {"work": 1e6, "throughput": {"1": 10}}, **extra}
    return parse(SubmitRequest, body, "job")


async def finish(svc, who, n: int) -> list[str]:
    ids = []
    for _ in range(n):
        job = await svc.submit(who, request())
        await svc.lifecycle.finish(job, JobState.DONE, Heartbeat(), time.time())
        ids.append(job.id)
    return ids


async def test_jobs_finished_while_the_lab_was_closed_are_still_listed(tmp_path):
    async with service(tmp_path) as svc:
        done = await finish(svc, ANN, 2)
        running = await svc.submit(ANN, request())
    # The server restarts (the lab was closed): the history comes back from the database.
    async with service(tmp_path) as svc:
        listed = views.job_list(svc.jobs.values(), ANN, svc.recent_jobs).jobs
        assert [j.id for j in listed] == [*done, running.id]
        assert [j.state for j in listed] == ["done", "done", "queued"]


async def test_only_the_most_recent_finished_jobs_of_each_user_are_listed(tmp_path):
    async with service(tmp_path, recent_jobs=3) as svc:
        anns = await finish(svc, ANN, 5)
        bobs = await finish(svc, BOB, 2)
        still = await svc.submit(ANN, request())
        listed = [j.id for j in views.job_list(svc.jobs.values(), ANN, svc.recent_jobs).jobs]
        assert listed == [*anns[2:], *bobs, still.id]
        # An older one is still there for whoever asks for it by id.
        assert svc.get(ANN, anns[0]).state == JobState.DONE
        svc.recent_jobs = 0
        listed = [j.id for j in views.job_list(svc.jobs.values(), ANN, svc.recent_jobs).jobs]
        assert listed == [still.id]


async def test_the_notebook_is_kept_and_shown_to_its_owner_only(tmp_path):
    async with service(tmp_path) as svc:
        job = await svc.submit(ANN, request(notebook="projects/mnist.ipynb"))
    async with service(tmp_path) as svc:  # stored
        again = svc.jobs[job.id]
        assert views.job_view(again).notebook == "projects/mnist.ipynb"
        [seen] = views.job_list(svc.jobs.values(), BOB, svc.recent_jobs).jobs
        assert isinstance(seen, PublicJob) and "notebook" not in seen.model_dump()


@pytest.mark.parametrize(
    "path", ["/home/ann/a.ipynb", "../a.ipynb", "a/../../b.ipynb", "C:\\\\a.ipynb", "", "a\nb"]
)
def test_a_notebook_path_must_be_relative_to_the_root(path):
    with pytest.raises(BadRequest, match="notebook"):
        request(notebook=path)


async def test_a_database_of_the_previous_schema_is_migrated_and_its_jobs_load(tmp_path):
    path = tmp_path / "scheduler.sqlite"
    with sqlite3.connect(path, isolation_level=None) as con:
        for script in migration_scripts(0)[: len(MIGRATIONS) - 1]:
            con.executescript(script)
        job = JobRecord(id="j-old", user="ann", name="old", spec=request(), job_dir="/x")
        data = job.to_dict()
        del data["spec"]["notebook"]  # written before jobs had one
        con.execute(
            "INSERT INTO jobs (id, user, state, submitted_at, data) VALUES (?, ?, ?, ?, ?)",
            ("j-old", "ann", "queued", 1.0, json.dumps(data)),
        )
    store = await Store.open(str(path))
    try:
        assert await store.schema_version() == len(MIGRATIONS)
        [old] = await store.load_records(JobRecord.from_dict, None)
        assert old.id == "j-old" and old.spec.notebook is None
    finally:
        await store.close()


async def test_the_api_takes_a_notebook_and_refuses_a_bad_one(jp_fetch):
    body = {"kind": "synthetic", "synthetic": {"work": 1e9, "throughput": {"1": 10}}}
    r = await jp_fetch(
        "elastic-gpu",
        "api",
        "jobs",
        method="POST",
        body=json.dumps({**body, "notebook": "a.ipynb"}),
    )
    job = json.loads(r.body)
    assert job["notebook"] == "a.ipynb"
    with pytest.raises(HTTPClientError) as bad:
        await jp_fetch(
            "elastic-gpu", "api", "jobs", method="POST", body=json.dumps({**body, "notebook": "/a"})
        )
    assert bad.value.code == 400 and "notebook" in json.loads(bad.value.response.body)["message"]
    listed = json.loads((await jp_fetch("elastic-gpu", "api", "jobs")).body)["jobs"]
    assert [j["id"] for j in listed] == [job["id"]]  # the refused one changed nothing
    await jp_fetch("elastic-gpu", "api", "jobs", job["id"], "cancel", method="POST", body="{}")
