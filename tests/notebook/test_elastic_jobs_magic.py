"""``%elastic_jobs`` takes the options of `jupyter elastic-gpu status` (``--all``, ``--state``,
``--user``, ``--since``) and shows the recent jobs by default, against a real Jupyter server
with the embedded scheduler (``scheduler_api``), in a real IPython shell."""

from __future__ import annotations

import time

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_elastic_gpu.notebook.client import SchedulerClient
from jupyter_elastic_gpu.notebook.magics import ElasticMagics
from jupyter_elastic_gpu.notebook.text import CELL_HINT, describe_job, error_hint

LONG = {"name": "long", "kind": "synthetic", "synthetic": {"work": 1e9, "throughput": {"1": 5}}}


@pytest.fixture
def shell(scheduler_api):
    shell = InteractiveShell.instance()
    magics = ElasticMagics(shell)
    magics._client = SchedulerClient(*scheduler_api)
    shell.register_magics(magics)
    yield shell
    InteractiveShell.clear_instance()


def jobs_printed(shell, capsys, line: str = "") -> str:
    shell.run_line_magic("elastic_jobs", line)
    return capsys.readouterr().out


def test_elastic_jobs_filters_and_says_what_it_left_out(shell, scheduler_api, capsys):
    client = SchedulerClient(*scheduler_api)
    open_job = client.submit(LONG)
    ended = client.submit({**LONG, "name": "ended", "max_gpus": 1, "min_gpus": 1})
    client.cancel(ended["id"])
    deadline = time.monotonic() + 60
    while client.job(ended["id"])["state"] != "cancelled":
        assert time.monotonic() < deadline, "the job was not cancelled"
        time.sleep(0.2)

    out = jobs_printed(shell, capsys)  # ended a moment ago: within the default 24 h
    assert open_job["id"] in out and ended["id"] in out and "not shown" not in out
    out = jobs_printed(shell, capsys, "--since 2999-01-01")
    assert open_job["id"] in out and ended["id"] not in out
    assert "1 finished job ended earlier than --since 2999-01-01: --all lists them" in out
    out = jobs_printed(shell, capsys, "--state cancelled --all")
    assert ended["id"] in out and open_job["id"] not in out
    out = jobs_printed(shell, capsys, "--state done")
    assert out.startswith("no jobs of yours\n")

    for line, message in (
        ("--state finished", "--state: unknown state 'finished'"),
        ("--since yesterday", "--since: expected a time back from now"),
        ("--all --since 2d", "--all and --since do not go together"),
        ("--user bob", r"only admins may list the jobs of another user \(bob\)"),
    ):
        with pytest.raises(UsageError, match=message):
            shell.run_line_magic("elastic_jobs", line)
    client.cancel(open_job["id"])


def test_an_undefined_name_is_explained_as_a_cell_only_in_notebook_views():
    trainer = {"type": "NameError", "message": "name 'x' is not defined", "hint": "the script"}
    assert error_hint(trainer) == CELL_HINT and "--pass" in CELL_HINT
    assert error_hint({"type": "ValueError", "hint": "h"}) == "h"
    job = {"id": "j-1", "name": "n", "state": "failed", "error": trainer}
    assert CELL_HINT in describe_job(job) and "the script" not in describe_job(job)
