"""What a cancel of a queued job and the log of a job that has none yet say: in the CLI
(`cancel ID`, `logs ID`) and on the notebook's job handle (job.cancel(), job.logs())."""

from __future__ import annotations

import argparse

import pytest

from jupyter_elastic_gpu import commands
from jupyter_elastic_gpu.notebook.job import ElasticJob

QUEUED = {"id": "j-1", "state": "queued", "started_at": None}
CANCELLED = {"id": "j-1", "state": "cancelled", "started_at": None}


class FakeClient:
    def __init__(self, job, after_cancel):
        self._job, self._after = job, after_cancel

    def job(self, job_id):
        return dict(self._job)

    def cancel(self, job_id, force=False):
        return dict(self._after)

    def logs(self, job_id, tail=200):
        return {"trainer": "", "sidecar": ""}


def cli(argv, client, monkeypatch, capsys):
    monkeypatch.setattr(commands, "_client", lambda: client)
    parser = argparse.ArgumentParser()
    commands.add_client_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, *capsys.readouterr()


def test_cancel_of_a_queued_job_says_it_never_started(monkeypatch, capsys):
    code, out, err = cli(["cancel", "j-1"], FakeClient(QUEUED, CANCELLED), monkeypatch, capsys)
    assert code == 0 and out == "cancelled\n"
    assert err.strip() == "cancelled j-1 before it started (it never had GPUs)"
    job = ElasticJob(FakeClient(QUEUED, CANCELLED), "j-1")
    assert job.cancel()["state"] == "cancelled"
    assert "before it started (it never had GPUs)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("job", "said"),
    [
        (QUEUED, "no log yet: the job is queued (it has not started)"),
        ({"id": "j-1", "state": "starting", "started_at": None}, "no log yet: the job is starting"),
    ],
)
def test_an_empty_log_says_why(job, said, monkeypatch, capsys):
    code, out, err = cli(["logs", "j-1"], FakeClient(job, job), monkeypatch, capsys)
    assert code == 0 and out == ""  # stdout stays the log itself
    assert said in err
    logs = ElasticJob(FakeClient(job, job), "j-1").logs()
    assert logs == "" and said in repr(logs)
