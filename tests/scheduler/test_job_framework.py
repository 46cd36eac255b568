"""A script job's framework, settled once at submission: read from the script (or as the user
said), shown on the job, handed to its sidecar; a script its framework cannot resize keeps
one GPU count for its whole run, and the job says why. Real service, real SQLite; only the
launch is recorded instead of started."""

from __future__ import annotations

import contextlib

import pytest
from elastic_gpu_sidecar.protocol import Framework
from servers import RecordingLauncher

from jupyter_elastic_gpu.errors import BadRequest
from jupyter_elastic_gpu.models import LeaseRequest, SubmitRequest, parse
from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
from jupyter_elastic_gpu.scheduler.execution.launcher import sidecar_command
from jupyter_elastic_gpu.scheduler.jobs import JobRecord
from jupyter_elastic_gpu.scheduler.port import views
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.scheduler.service import SchedulerService
from jupyter_elastic_gpu.scheduler.storage.store import Store

ANN = Principal("ann")

LIGHTNING = """
import lightning as L
import torch

class Model(L.LightningModule):
    pass

L.Trainer(max_epochs=2).fit(Model())
"""

#: A DDP loop with no checkpoint of its own, so a restart would start it over.
TORCH_LOOP = """
import torch
torch.distributed.init_process_group("gloo")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
"""


class ArgvLauncher(RecordingLauncher):
    """Records the sidecar command line each launch would run."""

    def __init__(self) -> None:
        super().__init__()
        self.argv: dict[str, list[str]] = {}

    async def launch(self, request):
        self.argv[request.job_id] = sidecar_command(request, "python")
        return await super().launch(request)


@contextlib.asynccontextmanager
async def scheduler(tmp_path):
    """(service, launcher) on 4 simulated GPUs and a database file."""
    store = await Store.open(str(tmp_path / "db.sqlite"))
    launcher = ArgvLauncher()
    try:
        yield (
            SchedulerService(
                store, SimulatedInventory(4), launcher, lambda j: "", job_root=str(tmp_path)
            ),
            launcher,
        )
    finally:
        await store.close()


def script_job(source: str, **fields) -> SubmitRequest:
    return parse(SubmitRequest, {"kind": "script", "script": source, **fields}, "job")


async def test_a_lightning_script_is_an_elastic_lightning_job(tmp_path):
    async with scheduler(tmp_path) as (svc, launcher):
        job = await svc.submit(ANN, script_job(LIGHTNING, min_gpus=1, max_gpus=4))
        view = views.job_view(job)
        assert view.framework == Framework.LIGHTNING and view.elastic is True
        assert (view.min_gpus, view.max_gpus) == (1, 4)
        assert view.notes == []
        await svc.step()
        argv = launcher.argv[job.id]
        assert argv[argv.index("--framework") + 1] == "lightning"
        assert argv.index("--framework") < argv.index("--")  # the sidecar's, not the script's
        assert "--no-standby" not in argv  # a spare interpreter shortens its resizes


async def test_a_torch_loop_without_its_own_checkpoint_keeps_its_requested_count(tmp_path):
    async with scheduler(tmp_path) as (svc, launcher):
        job = await svc.submit(
            ANN, script_job(TORCH_LOOP, min_gpus=1, max_gpus=4, requested_gpus=2)
        )
        view = views.job_view(job)
        assert view.framework == Framework.TORCHRUN and view.elastic is False
        assert (view.min_gpus, view.max_gpus, view.requested_gpus) == (2, 2, 2)
        [note] = view.notes
        assert "not elastic" in note and "2 GPUs for its whole run" in note
        assert "saves and loads no checkpoint of its own" in note
        await svc.step()  # four GPUs free: it still gets its two, no more
        assert len(job.desired.gpus) == 2
        argv = launcher.argv[job.id]
        assert argv[argv.index("--framework") + 1] == "torchrun"
        assert "--no-standby" in argv  # never resized: a spare interpreter would only cost
        events = await svc.store.events(job.id)
        assert "not elastic" in events[0]["message"]


async def test_a_loop_without_a_process_group_gets_one_gpu_whatever_it_asks(tmp_path):
    """It trains in one process: any GPU beyond the first would sit idle, held from others."""
    plain = TORCH_LOOP.replace('torch.distributed.init_process_group("gloo")\n', "")
    async with scheduler(tmp_path) as (svc, _):
        job = await svc.submit(ANN, script_job(plain, min_gpus=2, max_gpus=4))
        view = views.job_view(job)
        assert view.framework == Framework.TORCHRUN and view.elastic is False
        assert (view.min_gpus, view.max_gpus, view.requested_gpus) == (1, 1, 1)
        assert "no process group" in view.notes[0] and "1 GPU for its whole run" in view.notes[0]
        await svc.step()
        assert len(job.desired.gpus) == 1


async def test_the_framework_said_overrides_the_script(tmp_path):
    async with scheduler(tmp_path) as (svc, launcher):
        told = await svc.submit(ANN, script_job(TORCH_LOOP, framework="lightning", max_gpus=4))
        view = views.job_view(told)
        assert view.framework == Framework.LIGHTNING and view.elastic is True
        assert view.max_gpus == 4 and view.notes == []
        keras = await svc.submit(ANN, script_job(LIGHTNING, framework="keras"))
        assert views.job_view(keras).framework == Framework.KERAS
        await svc.step()
        argv = launcher.argv[told.id]
        assert argv[argv.index("--framework") + 1] == "lightning"


async def test_a_script_with_no_framework_it_knows_runs_at_one_count_and_says_so(tmp_path):
    async with scheduler(tmp_path) as (svc, _):
        job = await svc.submit(ANN, script_job("print('hello')", min_gpus=1, max_gpus=3))
        view = views.job_view(job)
        assert view.elastic is False and (view.min_gpus, view.max_gpus) == (1, 1)
        assert "no supported framework" in view.notes[0] and "--framework" in view.notes[0]


async def test_counts_are_fitted_to_the_server_before_they_are_fixed(tmp_path):
    async with scheduler(tmp_path) as (svc, _):
        job = await svc.submit(ANN, script_job(TORCH_LOOP, min_gpus=1, requested_gpus=8))
        view = views.job_view(job)
        assert (view.min_gpus, view.max_gpus, view.requested_gpus) == (4, 4, 4)
        assert any("requested_gpus 8 lowered to 4" in n for n in view.notes)


async def test_jobs_without_a_script_have_no_framework(tmp_path):
    synthetic = {"kind": "synthetic", "min_gpus": 1, "max_gpus": 2}
    synthetic["synthetic"] = {"work": 1e6, "throughput": {"1": 10, "2": 19}}
    async with scheduler(tmp_path) as (svc, launcher):
        job = await svc.submit(ANN, parse(SubmitRequest, synthetic, "job"))
        lease = await svc.submit(ANN, LeaseRequest(gpus=1).submit_request(True))
        for view in (views.job_view(job), views.job_view(lease)):
            assert view.framework is None and view.elastic is None and view.notes == []
        assert (views.job_view(job).min_gpus, views.job_view(job).max_gpus) == (1, 2)
        await svc.step()
        assert "--framework" not in launcher.argv[job.id]


@pytest.mark.parametrize("kind", ["synthetic", "interactive"])
def test_a_framework_goes_with_script_jobs_only(kind):
    body = {"kind": kind, "framework": "keras"}
    if kind == "synthetic":
        body["synthetic"] = {"work": 1e6, "throughput": {"1": 10}}
    with pytest.raises(BadRequest, match="'framework' only goes with kind 'script'"):
        parse(SubmitRequest, body, "job")


async def test_the_settled_framework_is_kept_in_the_database(tmp_path):
    async with scheduler(tmp_path) as (svc, _):
        job = await svc.submit(ANN, script_job(TORCH_LOOP, requested_gpus=3, max_gpus=4))
        [row] = [r for r in await svc.store.load_jobs() if r["id"] == job.id]
        kept = JobRecord.from_dict(row)
        assert kept.spec.framework == Framework.TORCHRUN  # never 'auto' once kept
        assert views.job_view(kept) == views.job_view(job)


def test_a_record_kept_before_frameworks_shows_none():
    """A script job a scheduler stored before frameworks were settled: no framework said,
    nothing claimed about its elasticity."""
    body = {"kind": "script", "script": "import keras", "max_gpus": 4, "requested_gpus": 1}
    old = {"id": "j-old", "user": "ann", "name": "old", "spec": body, "job_dir": "/x"}
    view = views.job_view(JobRecord.from_dict(old))
    assert view.framework is None and view.elastic is None


async def test_the_noise_scale_is_measured_in_keras_scripts_only(tmp_path):
    async with scheduler(tmp_path) as (svc, launcher):
        job = await svc.submit(ANN, script_job("import keras", measure_noise=True))
        assert views.job_view(job).measure_noise is True
        with pytest.raises(BadRequest, match="measured in Keras scripts only, and this is a "
                           "lightning script"):  # fmt: skip
            await svc.submit(ANN, script_job(LIGHTNING, measure_noise=True))
        assert [j.id for j in svc.jobs.values()] == [job.id]  # the refused one left nothing
        plain = await svc.submit(ANN, script_job("import keras"))
        await svc.step()
        assert "--measure-noise" in launcher.argv[job.id]
        assert "--measure-noise" not in launcher.argv[plain.id]
        assert views.job_view(plain).measure_noise is False


def test_the_noise_scale_goes_with_script_jobs_only():
    body = {"kind": "synthetic", "measure_noise": True}
    body["synthetic"] = {"work": 1e6, "throughput": {"1": 10}}
    with pytest.raises(BadRequest, match="'measure_noise' only goes with kind 'script'"):
        parse(SubmitRequest, body, "job")
