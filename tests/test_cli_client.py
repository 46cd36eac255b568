"""`jupyter-elastic-gpu submit | status | logs | cancel`.

Unit tests check argument validation (nothing is sent for bad input: the scheduler URL points
at a closed port, so a request would exit 5, not 2), output formatting and the exit codes that
need no scheduler. Integration tests run the real CLI (a subprocess, as a user's shell does)
against a running scheduler from the ``scheduler_api`` fixture: ``(api_url, token)``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import pytest
from servers import free_port, run_cli

from jupyter_elastic_gpu.commands import (
    add_client_commands,
    build_request,
    describe_submitted,
    parse_throughput,
)
from jupyter_elastic_gpu.errors import EXIT_CODE_HELP, ExitCode
from jupyter_elastic_gpu.log_follow import LogFollower, new_lines
from jupyter_elastic_gpu.notebook.client import SchedulerClient
from jupyter_elastic_gpu.status_table import format_status


def given(args) -> dict:
    """What the request says beyond its defaults."""
    return build_request(args).model_dump(mode="json", exclude_defaults=True)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jupyter-elastic-gpu")
    sub = parser.add_subparsers(dest="command", required=True)
    add_client_commands(sub)
    return parser


@pytest.fixture
def unreachable(monkeypatch, tmp_path):
    """A scheduler URL where nothing listens."""
    url = f"http://127.0.0.1:{free_port()}/elastic-gpu/api/"
    monkeypatch.setenv("ELASTIC_GPU_URL", url)
    monkeypatch.setenv("ELASTIC_GPU_TOKEN", "t")
    return url


@pytest.fixture
def nowhere(monkeypatch, tmp_path):
    """No scheduler to discover: no environment, no Jupyter runtime file, no daemon file."""
    for name in ("ELASTIC_GPU_URL", "ELASTIC_GPU_TOKEN", "JPY_PARENT_PID"):
        monkeypatch.delenv(name, raising=False)
    for name in ("runtime", "daemon"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("ELASTIC_GPU_DAEMON_DIR", str(tmp_path / "daemon"))


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    args = make_parser().parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "project" / "train mnist.py"
    path.parent.mkdir()
    path.write_text("import keras\nprint('training')\n")
    return path


# -- submit body and validation -----------------------------------------------------------------


def test_script_body(script):
    args = make_parser().parse_args(
        ["submit", str(script), "--min-gpus", "1", "--max-gpus", "4", "--requested-gpus", "2",
         "--epochs", "3", "--priority", "2.5", "--batch-policy", "keep-per-replica",
         "--framework", "torchrun", "--simulated", "--measure-noise"]
    )  # fmt: skip
    assert given(args) == {
        "script": "import keras\nprint('training')\n",
        "cwd": str(script.parent.resolve()),
        "name": "train mnist",
        "max_gpus": 4,
        "requested_gpus": 2,
        "epochs": 3,
        "priority": 2.5,
        "batch_policy": "keep-per-replica",
        "framework": "torchrun",
        "simulated": True,
        "measure_noise": True,
    }


def test_script_body_sends_only_what_was_given_and_a_safe_default_name(tmp_path):
    path = tmp_path / "r+d (v2).py"
    path.write_text("pass\n")
    args = make_parser().parse_args(
        ["submit", str(path), "--min-gpus", "2", "--max-gpus", "2", "--name", " mine "]
    )
    body = given(args)
    assert set(body) == {"script", "cwd", "name", "min_gpus", "max_gpus"}
    assert body["name"] == "mine"
    args.name = None
    assert given(args)["name"] == "r-d -v2-"


def test_synthetic_body():
    args = make_parser().parse_args(
        ["submit", "--synthetic", "--work", "5e4", "--throughput", "1:100, 2:190,4:360",
         "--min-gpus", "1", "--max-gpus", "4", "--time-scale", "20", "--name", "syn"]
    )  # fmt: skip
    assert given(args) == {
        "kind": "synthetic",
        "synthetic": {
            "work": 50000.0,
            "throughput": {"1": 100.0, "2": 190.0, "4": 360.0},
            "time_scale": 20.0,
        },
        "max_gpus": 4,
        "name": "syn",
    }


def test_parse_throughput():
    assert parse_throughput("1:100") == {"1": 100.0}
    assert parse_throughput("2:1.5e3,1:800") == {"2": 1500.0, "1": 800.0}


SYN = ["submit", "--synthetic", "--work", "100", "--throughput", "1:100"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--min-gpus", "3", "--max-gpus", "2"], "--min-gpus (3) is above --max-gpus (2)"),
        (
            ["--min-gpus", "0", "--max-gpus", "2"],
            "--min-gpus: must be at least 1, got 0",
        ),
        (
            ["--min-gpus", "1", "--max-gpus", "-1"],
            "--max-gpus: must be at least 1, got -1",
        ),
        (
            ["--max-gpus", "2", "--requested-gpus", "3"],
            "--requested-gpus (3) must lie between --min-gpus (1) and --max-gpus (2)",
        ),
        (
            ["--min-gpus", "1", "--max-gpus", "2", "--priority", "0"],
            "--priority: must be above 0, got 0.0",
        ),
        (["--min-gpus", "1", "--max-gpus", "1", "--name", " "], "name must be 1-80 letters"),
        (["--min-gpus", "1", "--max-gpus", "1", "--epochs", "2"], "--epochs is for script jobs"),
        (["--min-gpus", "1", "--max-gpus", "1", "--simulated"], "--simulated is for script jobs"),
        (["--framework", "keras"], "--framework is for script jobs"),
        (["--measure-noise"], "--measure-noise is for script jobs"),
        (
            ["--min-gpus", "1", "--max-gpus", "1", "--time-scale", "0"],
            "synthetic.time_scale: must be above 0, got 0.0",
        ),
    ],
)
def test_bad_synthetic_submissions_exit_2_with_one_line_and_send_nothing(
    argv, message, unreachable, capsys
):
    code, out, err = run(SYN + argv, capsys)
    assert (code, out) == (2, "")
    assert err.startswith("jupyter-elastic-gpu submit: error: ") and err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--work", "100", "--throughput", "1:100,x"], "expected GPUS:SAMPLES_PER_S pairs"),
        (["--work", "100", "--throughput", "0:100"], "got '0:100'"),
        (["--work", "100", "--throughput", "1:-5"], "got '1:-5'"),
        (["--work", "100", "--throughput", "1:inf"], "got '1:inf'"),
        (["--work", "100", "--throughput", "1:100,1:90"], "1 GPUs is given twice"),
        (["--throughput", "1:100"], "--synthetic needs --work W and --throughput"),
        (["--work", "100"], "--synthetic needs --work W and --throughput"),
        (
            ["--work", "0", "--throughput", "1:100"],
            "synthetic.work: must be above 0",
        ),
    ],
)
def test_bad_synthetic_specs(argv, message, unreachable, capsys):
    base = ["submit", "--synthetic", "--min-gpus", "1", "--max-gpus", "2"]
    code, out, err = run(base + argv, capsys)
    assert (code, out) == (2, "")
    assert message in err and err.count("\n") == 1


def test_bad_script_submissions(tmp_path, script, unreachable, capsys):
    empty = tmp_path / "empty.py"
    empty.write_text("\n  \n")
    binary = tmp_path / "model.h5"
    binary.write_bytes(b"\x89HDF\r\n\x1a\n\xff\xfe")
    cases = [
        ([str(tmp_path / "missing.py")], "missing.py: no such file"),
        ([str(tmp_path)], f"{tmp_path}: is a directory: give the training script in it"),
        ([str(empty)], "the script is empty"),
        ([str(binary)], "not a UTF-8 text file"),
        ([], "give the training script to run (or --synthetic)"),
        ([str(script), "--synthetic", "--work", "1", "--throughput", "1:1"], "--synthetic runs no"),
        ([str(script), "--work", "10"], "--work is for --synthetic jobs"),
        ([str(script), "--throughput", "1:10"], "--throughput is for --synthetic jobs"),
        (
            [str(script), "--epochs", "0"],
            "--epochs: must be at least 1, got 0",
        ),
    ]
    for argv, message in cases:
        code, out, err = run(["submit", *argv, "--min-gpus", "1", "--max-gpus", "1"], capsys)
        assert (code, out) == (2, ""), argv
        assert message in err and err.count("\n") == 1, (argv, err)


def test_a_framework_that_does_not_exist_is_refused_in_our_voice(script, unreachable, capsys):
    from jupyter_elastic_gpu.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["submit", str(script), "--framework", "jax"])
    out, err = capsys.readouterr()
    assert (exit_.value.code, out) == (2, "")
    [said] = [line for line in err.splitlines() if "error:" in line]
    assert said.startswith("jupyter-elastic-gpu submit: error: --framework: must be one of ")
    assert said.endswith("torchrun', got 'jax'") or said.endswith("torchrun, got 'jax'")
    assert "--framework {auto,keras,lightning,transformers,torchrun}" in err  # the usage


def test_the_framework_defaults_to_auto(script):
    request = build_request(make_parser().parse_args(["submit", str(script)]))
    assert request.framework == "auto"


def test_sizes_default_as_in_the_magic(script):
    """No range given: min 1, and max every GPU of the server (decided by the scheduler)."""
    request = build_request(make_parser().parse_args(["submit", str(script)]))
    assert (request.min_gpus, request.max_gpus, request.requested_gpus) == (1, None, None)


def test_logs_tail_must_be_positive(unreachable, capsys):
    code, _, err = run(["logs", "j-1", "--tail", "0"], capsys)
    assert code == 2 and "--tail must be at least 1" in err


# -- exit 5: no scheduler -----------------------------------------------------------------------


def test_no_scheduler_found_exits_5_with_one_line(nowhere, capsys):
    code, out, err = run(["status"], capsys)
    assert (code, out) == (5, "")
    assert err.startswith("jupyter-elastic-gpu status: error: no elastic-gpu scheduler found (")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--json"],
        ["cancel", "j-1"],
        ["logs", "j-1"],
        ["logs", "j-1", "--follow"],
        [*SYN, "--min-gpus", "1", "--max-gpus", "1"],
    ],
)
def test_unreachable_scheduler_exits_5(argv, unreachable, capsys, monkeypatch):
    monkeypatch.setattr("jupyter_elastic_gpu.log_follow.FOLLOW_RECONNECT_S", 0.0)
    code, out, err = run(argv, capsys)
    assert (code, out) == (5, "")
    assert f"error: cannot reach the scheduler at {unreachable}" in err
    assert err.count("\n") == 1


# -- formatting ---------------------------------------------------------------------------------


def test_status_table():
    doc = {
        "gpus": [{"id": "0", "holder": "j-7f3a"}, {"id": "1", "holder": None},
                 {"id": "10", "holder": {"job": "j-99", "user": "bob"}}],
        "jobs": [
            {"id": "j-7f3a", "name": "mnist", "user": "ann", "state": "running",
             "gpus": ["0", "10"], "min_gpus": 1, "max_gpus": 4,
             "progress": {"epoch": 3, "epochs": 20, "step": 118, "replicas": 2},
             "reason": "running on 2 of up to 4 GPUs: the others help other jobs more"},
            {"id": "j-99", "name": None, "user": "bob", "state": "queued", "gpus": [],
             "min_gpus": 2, "max_gpus": 2,
             "progress": {"epoch": None, "step": None, "replicas": None}},
        ],
    }  # fmt: skip
    assert format_status(doc) == (
        "GPU  HOLDER\n"
        "0    j-7f3a\n"
        "1    free\n"
        "10   j-99 (bob)\n"
        "\n"
        "ID      NAME   USER  STATE    GPUS  RANGE     EPOCH       REASON\n"
        "j-7f3a  mnist  ann   running  0,10  1–4 GPUs  epoch 4/20  running on 2 of up to 4 GPUs: "
        "the others help other jobs more\n"
        "j-99    -      bob   queued   -     2 GPUs    -           -"
    )


def test_the_readme_lists_every_exit_status_as_the_cli_does():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for code, meaning in EXIT_CODE_HELP.items():
        assert f"| {int(code)} | {meaning} |" in readme, code
    assert ExitCode.of_status(None) == ExitCode.UNREACHABLE == 5
    assert [ExitCode.of_status(s) for s in (400, 401, 403, 404, 409, 413, 500, 503, 507)] == [
        2,
        4,
        4,
        3,
        1,
        2,
        1,
        5,
        5,
    ]


def test_status_table_when_empty():
    assert format_status({"gpus": [], "jobs": []}) == "no GPUs\n\nno jobs"


def test_status_says_under_the_gpus_why_some_stay_idle():
    why = "1 GPU idle: growing j-3 to 2 would save ~5 s, a resize costs ~8 s"
    doc = {"gpus": [{"id": "0", "holder": "j-3"}, {"id": "1", "holder": None}], "idle": why,
           "jobs": []}  # fmt: skip
    assert format_status(doc) == f"GPU  HOLDER\n0    j-3\n1    free\n{why}\n\nno jobs"
    assert format_status({**doc, "idle": None}) == "GPU  HOLDER\n0    j-3\n1    free\n\nno jobs"
    # A line of its own whatever the server sends: no newline or tab breaks the layout.
    assert format_status({**doc, "idle": "1 GPU idle:\n\tj-3"}).splitlines()[3] == (
        "1 GPU idle: j-3"
    )


def test_describe_submitted():
    job = {"id": "j-1", "name": "mnist", "state": "queued", "reason": "queued: 4 GPUs busy"}
    assert describe_submitted(job) == (
        "submitted j-1 (mnist): queued: 4 GPUs busy; follow it with "
        "`jupyter elastic-gpu logs --follow j-1`"
    )
    assert describe_submitted({"id": "j-2", "state": "starting", "reason": None}).startswith(
        "submitted j-2: starting; "
    )


def test_new_lines_aligns_two_windows_of_one_log():
    log = [f"line {i}\n" for i in range(10)]
    assert new_lines([], log[:3]) == (log[:3], False)
    assert new_lines(log[:3], log[:5]) == (log[3:5], False)  # the log is shorter than the window
    assert new_lines(log[0:4], log[2:6]) == (log[4:6], False)  # the window slid by two
    assert new_lines(log[2:6], log[2:6]) == ([], False)  # nothing new
    assert new_lines(log[0:3], log[5:8]) == (log[5:8], True)  # more new lines than the window
    same = ["epoch\n"] * 3
    assert new_lines(same, [*same, "done\n"]) == (["done\n"], False)


def test_log_follower_prints_each_line_once_and_whole():
    f = LogFollower(tail=2)
    assert f.feed("a\nb\nc\nhal", final=False) == "b\nc\n"  # the last 2 lines; "hal" waits
    assert f.feed("a\nb\nc\nhalf\nd\n", final=False) == "half\nd\n"
    assert f.feed("c\nhalf\nd\n", final=False) == ""  # a shorter window, nothing new
    # A progress bar's line is not finished until its "\n": held back.
    assert f.feed("d\nepoch 1 10%\repoch 1 20%\re", final=False) == ""
    assert f.feed("d\nepoch 1 10%\repoch 1 100%\nend", final=True) == (
        "epoch 1 10%\repoch 1 100%\nend\n"  # the job ended: the partial line comes too
    )


def test_log_follower_says_when_lines_were_lost():
    f = LogFollower(tail=10)
    assert f.feed("1\n2\n", final=False) == "1\n2\n"
    assert f.feed("7\n8\n", final=True) == LogFollower.GAP + "7\n8\n"


# -- integration: the real CLI against a running scheduler ---------------------------------------


def cli(api: tuple[str, str], *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cli(*api, *argv, timeout=timeout)


SHORT = ["submit", "--synthetic", "--work", "300", "--throughput", "1:100,2:190",
         "--time-scale", "5", "--min-gpus", "1", "--max-gpus", "2"]  # fmt: skip
LONG = ["submit", "--synthetic", "--work", "1e9", "--throughput", "1:100",
        "--min-gpus", "1", "--max-gpus", "1"]  # fmt: skip


def submitted(api: tuple[str, str], argv: list[str]) -> str:
    res = cli(api, *argv)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def wait_state(client: SchedulerClient, job_id: str, states, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.job(job_id)
        if job["state"] in states or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


def test_submit_prints_the_id_alone_and_status_shows_the_job(scheduler_api):
    res = cli(scheduler_api, *SHORT, "--name", "cli-short")
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip()
    assert res.stdout == job_id + "\n" and " " not in job_id
    assert f"submitted {job_id} (cli-short)" in res.stderr
    client = SchedulerClient(*scheduler_api)
    job = client.job(job_id)
    assert (job["name"], job["kind"], job["min_gpus"], job["max_gpus"]) == (
        "cli-short",
        "synthetic",
        1,
        2,
    )

    res = cli(scheduler_api, "status", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert set(doc) == {"gpus", "jobs", "hidden", "idle", "idle_kind", "idle_figures"}
    assert all(set(g) >= {"id", "holder"} for g in doc["gpus"])
    [mine] = [j for j in doc["jobs"] if j["id"] == job_id]
    assert set(mine) >= {"id", "name", "user", "state", "gpus", "min_gpus", "max_gpus", "progress"}
    assert set(mine["progress"]) >= {"epoch", "epochs", "step", "replicas"}

    res = cli(scheduler_api, "status")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("GPU  HOLDER\n")
    assert "ID" in res.stdout and job_id in res.stdout and "cli-short" in res.stdout


def test_status_says_why_gpus_stay_idle_and_nothing_once_all_are_used(scheduler_api):
    """A one-GPU job on four GPUs leaves three idle, and ``status`` says why under the GPUs (the
    API's ``idle``); a job on all four leaves none, and the line goes."""
    client = SchedulerClient(*scheduler_api)

    def gpu_lines(text: str) -> list[str]:
        return text.split("\n\n")[0].splitlines()

    one = submitted(scheduler_api, LONG)
    wait_state(client, one, ("running",))
    res = cli(scheduler_api, "status")
    assert res.returncode == 0, res.stderr
    lines = gpu_lines(res.stdout)
    assert lines[0] == "GPU  HOLDER" and len(lines) == 1 + 4 + 1, res.stdout
    assert lines[-1].startswith("3 GPUs idle: "), res.stdout
    assert json.loads(cli(scheduler_api, "status", "--json").stdout)["idle"].startswith(
        "3 GPUs idle: "
    )
    assert cli(scheduler_api, "cancel", one).returncode == 0
    wait_state(client, one, ("cancelled",))

    four = submitted(scheduler_api, [*LONG[:-4], "--min-gpus", "4", "--max-gpus", "4"])
    assert wait_state(client, four, ("running",))["state"] == "running"
    res = cli(scheduler_api, "status")
    assert res.returncode == 0, res.stderr
    assert gpu_lines(res.stdout)[1:] == [f"{g}    {four}" for g in range(4)], res.stdout
    assert json.loads(cli(scheduler_api, "status", "--json").stdout)["idle"] is None
    assert cli(scheduler_api, "cancel", four).returncode == 0


def test_logs_follow_returns_when_the_job_ends(scheduler_api):
    job_id = submitted(scheduler_api, SHORT)
    res = cli(scheduler_api, "logs", job_id, "--follow", timeout=180)
    assert res.returncode == 0, res.stderr
    assert "generation" in res.stdout  # the sidecar's line before each trainer start
    assert f"job {job_id} ended done" in res.stderr
    assert SchedulerClient(*scheduler_api).job(job_id)["state"] == "done"
    res = cli(scheduler_api, "logs", job_id, "--sidecar", "--tail", "5")
    assert res.returncode == 0 and 0 < res.stdout.count("\n") <= 5


def test_cancel_prints_the_new_state(scheduler_api):
    job_id = submitted(scheduler_api, LONG)
    client = SchedulerClient(*scheduler_api)
    wait_state(client, job_id, ("running",))
    res = cli(scheduler_api, "cancel", job_id)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() in ("stopping", "cancelled")
    assert wait_state(client, job_id, ("cancelled",))["state"] == "cancelled"


def test_cancel_force_ends_the_job_at_once(scheduler_api):
    job_id = submitted(scheduler_api, LONG)
    client = SchedulerClient(*scheduler_api)
    wait_state(client, job_id, ("running",))
    res = cli(scheduler_api, "cancel", "--force", job_id)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "cancelled"
    assert "ended at once by" in client.job(job_id)["reason"]


def test_suspend_and_resume_print_the_new_state(scheduler_api):
    job_id = submitted(scheduler_api, LONG)
    client = SchedulerClient(*scheduler_api)
    wait_state(client, job_id, ("running",))
    res = cli(scheduler_api, "suspend", job_id)
    assert res.returncode == 0, res.stderr
    assert "held until resumed" in res.stderr
    assert client.job(job_id)["held"] is True
    wait_state(client, job_id, ("queued",))
    res = cli(scheduler_api, "resume", job_id)
    assert res.returncode == 0, res.stderr
    assert client.job(job_id)["held"] is False
    wait_state(client, job_id, ("running",))
    assert cli(scheduler_api, "cancel", job_id).returncode == 0


def test_a_script_job_is_submitted_with_its_folder_and_name(scheduler_api, script):
    res = cli(scheduler_api, "submit", str(script), "--min-gpus", "1", "--max-gpus", "1",
              "--simulated", "--epochs", "1")  # fmt: skip
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip()
    client = SchedulerClient(*scheduler_api)
    job = client.job(job_id)
    assert (job["kind"], job["name"], job["epochs"]) == ("script", "train mnist", 1)
    assert cli(scheduler_api, "cancel", job_id).returncode == 0


def test_each_refusal_has_its_exit_code_and_one_line(scheduler_api, tmp_path):
    """Not found 3, a wrong token 4 (naming ELASTIC_GPU_TOKEN), a value the scheduler refuses 2;
    each with one line on stderr and nothing on stdout (exit codes of ``errors.ExitCode``)."""
    cases = [
        (["cancel", "j-does-not-exist"], scheduler_api, 3, "no job 'j-does-not-exist'"),
        (["logs", "j-does-not-exist"], scheduler_api, 3, "no job 'j-does-not-exist'"),
        (["suspend", "j-nope"], scheduler_api, 3, "no job 'j-nope'"),
        (
            ["status"],
            (scheduler_api[0], "not-a-token"),
            4,
            "set ELASTIC_GPU_TOKEN to a token of the server at http://127.0.0.1:",
        ),
        (
            [*SYN, "--min-gpus", "64"],
            scheduler_api,
            2,
            "--min-gpus (64) is more than the 4 GPUs of this server",
        ),
    ]
    for argv, api, code, message in cases:
        res = cli(api, *argv)
        assert (res.returncode, res.stdout) == (code, ""), (argv, res.stderr)
        assert res.stderr.startswith(f"jupyter-elastic-gpu {argv[0]}: error: ")
        assert message in res.stderr, (argv, res.stderr)
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


def test_an_unknown_option_prints_its_subcommands_usage(tmp_path):
    api = (f"http://127.0.0.1:{free_port()}/", "t")  # nothing is sent: usage comes first
    for argv, unknown in (
        (["submit", "x.py", "--bogus"], "--bogus"),
        (["status", "--bogus", "1"], "--bogus 1"),
        (["cancel", "j-1", "--now"], "--now"),
    ):
        res = cli(api, *argv)
        assert (res.returncode, res.stdout) == (2, ""), res.stderr
        assert res.stderr.startswith(f"usage: jupyter-elastic-gpu {argv[0]} "), res.stderr
        assert f"{argv[0]}: error: unrecognized arguments: {unknown}\n" in res.stderr
    res = cli(api, "--help")
    assert "exit status:" in res.stdout and "  4    forbidden: " in res.stdout
    assert "exit status:" in cli(api, "status", "--help").stdout


def test_a_script_that_does_not_compile_is_refused_at_once(scheduler_api, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import keras\n\nfor x in range(3)\n    print(x)\n")
    client = SchedulerClient(*scheduler_api)
    before = len(client.jobs({"all": "true"})["jobs"])
    res = cli(scheduler_api, "submit", str(bad))
    assert (res.returncode, res.stdout) == (2, ""), res.stderr
    assert f"error: {bad}:3: SyntaxError: expected ':': for x in range(3)" in res.stderr
    assert "nothing was submitted" in res.stderr and res.stderr.count("\n") == 1
    indented = tmp_path / "indent.py"
    indented.write_text("x = 1\n  y = 2\n")
    res = cli(scheduler_api, "submit", str(indented))
    assert res.returncode == 2 and f"{indented}:2: IndentationError: unexpected indent" in (
        res.stderr
    )
    assert len(client.jobs({"all": "true"})["jobs"]) == before
