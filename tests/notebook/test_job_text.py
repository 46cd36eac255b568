"""How a job reads as text: one epoch text (1-based "epoch N/M", as Keras' own log counts, N
never above M) in the CLI and the text view, a state never said twice, and the GPU counts a
resized job has had (the story a saved notebook keeps)."""

from __future__ import annotations

import re

import pytest

from jupyter_elastic_gpu.notebook.text import ESTIMATING, describe_job, epoch_text
from jupyter_elastic_gpu.status_table import format_status


@pytest.mark.parametrize(
    ("progress", "state", "shown"),
    [
        ({"epoch": 0, "epochs": 3}, "running", "epoch 1/3"),  # the first epoch runs
        ({"epoch": 2, "epochs": 3}, "running", "epoch 3/3"),
        ({"epoch": 3, "epochs": 3}, "running", "epoch 3/3"),  # past the last: never above
        ({"epoch": 399, "epochs": 128}, "running", "epoch 128/128"),
        ({"epoch": 1, "epochs": 3}, "done", "epoch 3/3"),
        ({"epoch": 4}, "running", "epoch 5"),  # no total known
        ({"epochs": 3}, "queued", "epoch 1/3"),
        ({}, "queued", None),
        (None, "queued", None),
    ],
)
def test_one_epoch_text(progress, state, shown):
    assert epoch_text(progress, state) == shown


JOB = {
    "id": "j-1",
    "name": "mnist",
    "user": "ann",
    "state": "running",
    "gpus": ["0", "1"],
    "min_gpus": 1,
    "max_gpus": 4,
    "position": None,
    "reason": "running on 2 of up to 4 GPUs: the others help other jobs more",
    "progress": {"epoch": 399, "epochs": 400, "step": 128, "steps_per_epoch": 256},
    "history": [],
    "resizes": 0,
    "eta_s": None,
}


def test_the_cli_and_the_text_view_show_the_same_epoch():
    doc = {
        "gpus": [],
        "jobs": [
            {
                **{k: JOB[k] for k in ("id", "name", "user", "state", "gpus", "reason")},
                "min_gpus": 1,
                "max_gpus": 4,
                "progress": {"epoch": 399, "epochs": 400, "step": 128, "replicas": 2},
            }
        ],
    }
    assert "epoch 400/400" in format_status(doc)
    assert "399/128" not in format_status(doc)
    assert "epoch 400/400" in describe_job(JOB)


def test_a_done_job_does_not_say_done_done():
    text = describe_job({**JOB, "state": "done", "reason": "done", "model_path": "/m.keras"})
    assert text.count("done") == 1, text
    assert "load_model" in text


def test_a_resized_job_says_its_gpu_counts():
    history = [{"t": 1.0, "gpus": ["0", "1", "2", "3"], "why": "admitted"}]
    assert "GPU counts" not in describe_job({**JOB, "history": history})
    history += [
        {"t": 2.0, "gpus": ["0", "1"], "why": "shrunk for j-2"},
        {"t": 3.0, "gpus": ["0", "1", "2", "3"], "why": "grown back"},
    ]
    assert "GPU counts so far: 4 → 2 → 4" in describe_job({**JOB, "history": history, "resizes": 2})


def test_a_running_job_says_estimating_until_its_end_is_told():
    estimating = describe_job({**JOB, "estimating": True, "eta_s": None})
    assert ESTIMATING in estimating and "ETA " + "1" not in estimating
    told = describe_job({**JOB, "estimating": False, "eta_s": 690.0})
    assert "ETA 11 min 30 s" in told and ESTIMATING not in told


@pytest.mark.parametrize(
    ("epoch", "epochs", "shown"),
    [(0, 20, "epoch 1/20"), (2, 20, "epoch 3/20"), (20, 20, "epoch 20/20")],
)
def test_every_view_counts_an_epoch_as_keras_prints_it(epoch, epochs, shown):
    """A record of ``job.history`` (``epoch``: Keras' 0-based index of the epoch running) is
    "epoch N/M" alike in the text view, the CLI's table and the sidecar's status, never past
    the total (a record after the last epoch ended says the last)."""
    from elastic_gpu_sidecar.cli import format_status as sidecar_status

    record = {"epoch": epoch, "epochs": epochs, "step_in_epoch": 0, "steps_per_epoch": 10}
    job = {**JOB, "progress": {"epoch": epoch, "epochs": epochs}}
    doc = {"gpus": [], "jobs": [{**job, "min_gpus": 1, "max_gpus": 4}]}
    assert shown in describe_job(job)
    assert shown in format_status(doc)
    assert f"progress    {shown}, step" in sidecar_status({"gpus": []}, record)


def test_the_text_says_the_framework_and_a_count_that_never_changes():
    elastic = describe_job({**JOB, "framework": "lightning", "elastic": True})
    assert elastic.splitlines()[1] == "framework lightning"
    fixed = {**JOB, "framework": "torchrun", "elastic": False, "min_gpus": 2, "max_gpus": 2}
    assert (
        describe_job(fixed).splitlines()[1] == "framework torchrun, not elastic: 2 GPUs throughout"
    )
    assert "framework" not in describe_job(JOB)  # a job without one (synthetic, a lease)


def test_what_the_trainer_says_of_a_running_job_is_shown_until_it_ends():
    said = "the script asks for Trainer(devices=8); the job's grant decides: devices=2"
    running = {**JOB, "state": "running", "progress": {**JOB.get("progress", {}), "note": said}}
    assert f"trainer: {said}" in describe_job(running).splitlines()
    assert "trainer:" not in describe_job({**running, "state": "done"})


def test_a_trainers_note_reaches_the_job_view_cut_to_its_bound():
    """The trainer is the user's process: a note past the bound is cut, its progress kept."""
    from jupyter_elastic_gpu.models.heartbeat import MAX_NOTE_CHARS, ProgressRecord
    from jupyter_elastic_gpu.scheduler.port.views import progress_view

    class Job:
        total_work, work_done = None, 0
        progress = ProgressRecord.model_validate(
            {"t": 1.0, "global_step": 7, "replicas": 2, "note": "x" * (MAX_NOTE_CHARS + 50)}
        )

    view = progress_view(Job())
    assert view.global_step == 7 and view.note == "x" * MAX_NOTE_CHARS
    assert ProgressRecord.model_validate({"t": 1.0, "note": {"not": "text"}}).note is None


def test_the_noise_scale_says_how_well_the_batch_uses_its_samples():
    measured = {"noise_scale": 1850.4, "noise_steps": 600, "batch_size": 256, "epoch": 0}
    job = {**JOB, "framework": "keras", "measure_noise": True, "progress": measured}
    line = describe_job(job).splitlines()[2]
    # phi / (phi + B) = 1850.4 / 2106.4
    assert line == (
        "gradient noise scale 1,850 samples (from 600 step pairs): batch 256 makes 88% of the "
        "use of each sample that a small batch makes"
    )
    starting = {**job, "state": "running", "progress": {"epoch": 0}}
    assert "gradient noise scale: measuring" in describe_job(starting)
    unclear = {**job, "progress": {"noise_scale": None, "noise_steps": 40, "batch_size": 256}}
    assert "not measurable yet (40 step pairs" in describe_job(unclear)
    assert "noise" not in describe_job({**job, "measure_noise": False})


def test_the_noise_scale_reaches_the_job_view_and_bad_values_are_refused():
    from pydantic import ValidationError

    from jupyter_elastic_gpu.models.heartbeat import ProgressRecord
    from jupyter_elastic_gpu.scheduler.port.views import progress_view

    class Job:
        total_work, work_done = None, 0
        progress = ProgressRecord.model_validate(
            {"t": 1.0, "batch_size": 64, "grad_sqr": -0.5, "grad_var": 30.0,
             "noise_scale": None, "noise_steps": 12}
        )  # fmt: skip

    view = progress_view(Job())
    assert (view.batch_size, view.noise_scale, view.noise_steps) == (64, None, 12)
    for bad in ({"noise_scale": -1.0}, {"grad_var": float("inf")}, {"noise_steps": "many"}):
        with pytest.raises(ValidationError):
            ProgressRecord.model_validate({"t": 1.0, **bad})


def test_the_jobs_table_says_a_mig_profile_where_a_job_asks_for_a_slice():
    from jupyter_elastic_gpu.notebook.text import jobs_table

    base = {"user": "ann", "state": "running", "progress": None, "reason": "running"}
    table = jobs_table(
        [
            {
                **base,
                "id": "j-1",
                "gpus": ["MIG-a"],
                "min_gpus": 1,
                "max_gpus": 1,
                "mig": "1g.10gb",
            },
            {**base, "id": "j-2", "gpus": ["0", "1"], "min_gpus": 1, "max_gpus": 4},
        ]
    ).splitlines()
    assert re.search(r"\bMIG-a\s+1g\.10gb\s", table[1]), table
    assert re.search(r"\b0,1\s+1\u20134 GPUs\s", table[2]), table


def test_status_lists_mig_instances_under_their_gpu_with_their_holders():
    doc = {
        "gpus": [
            {
                "id": "0",
                "kind": "H100-80GB",
                "holder": None,
                "mig": [
                    {"uuid": "MIG-a", "profile": "3g.40gb", "holder": "j-1"},
                    {"uuid": "MIG-b", "profile": "1g.10gb", "holder": None},
                ],
            },
            {"id": "1", "kind": "H100-80GB", "holder": "j-2", "mig": None},
        ],
        "jobs": [],
    }
    lines = format_status(doc).splitlines()
    assert lines[0].split() == ["GPU", "KIND", "HOLDER"]
    assert [line.split() for line in lines[1:5]] == [
        ["0", "H100-80GB", "free"],
        ["MIG-a", "3g.40gb", "j-1"],
        ["MIG-b", "1g.10gb", "free"],
        ["1", "H100-80GB", "j-2"],
    ]
    assert lines[2].startswith("  MIG-a")
