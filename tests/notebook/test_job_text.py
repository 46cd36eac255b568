"""How a job reads in every view: one epoch text (1-based "epoch N/M", as Keras' own log
counts, N never above M) in the CLI, the text view and the widget, and a state never said
twice."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.commands import format_status
from jupyter_elastic_gpu.notebook.text import describe_job, epoch_text, reason_after_state
from jupyter_elastic_gpu.notebook.widget import JobView


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


def test_the_cli_the_text_view_and_the_widget_show_the_same_epoch():
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
    view = JobView(None)
    view._render(JOB)
    assert view.epoch_label.value == "epoch 400/400"


@pytest.mark.parametrize(
    ("state", "reason", "shown"),
    [
        ("done", "done", ""),
        ("cancelled", "cancelled", ""),
        ("cancelled", "cancelled by ann", "by ann"),
        ("failed", "failed: ValueError: boom", "ValueError: boom"),
        ("queued", "queued: needs 2 GPUs, 0 free", "needs 2 GPUs, 0 free"),
        ("queued", "suspended: needs 2 GPUs, 0 free", "suspended: needs 2 GPUs, 0 free"),
        ("running", "running on 2 GPUs (its maximum)", "on 2 GPUs (its maximum)"),
        ("starting", "starting on 2 GPUs", "on 2 GPUs"),
        ("running", "", ""),
    ],
)
def test_a_reason_next_to_its_state_does_not_repeat_it(state, reason, shown):
    assert reason_after_state(state, reason) == shown


def test_a_done_job_does_not_say_done_done():
    view = JobView(None)
    view._render({**JOB, "state": "done", "reason": "done", "model_path": None})
    line = view.state.value
    assert line.count("done") == 1, line
