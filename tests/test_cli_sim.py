"""`jupyter-elastic-gpu simulate` and `workload generate` as a user runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from jupyter_elastic_gpu.cli import main


def test_generate_then_simulate_writes_table_json_and_plot(tmp_path, capsys):
    out = tmp_path / "wl"
    assert (
        main(
            [
                "workload",
                "generate",
                "--out",
                str(out),
                "--jobs",
                "20",
                "--seed",
                "7",
                "--window",
                "3600",
                "--max-gpus",
                "4",
            ]
        )
        == 0
    )
    assert (out / "jobs.csv").exists() and (out / "profiles.csv").exists()
    capsys.readouterr()
    js, png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        [
            "simulate",
            "--jobs",
            str(out / "jobs.csv"),
            "--profiles",
            str(out / "profiles.csv"),
            "--nodes",
            "1",
            "--gpus-per-node",
            "4",
            "--policy",
            "adaptive,static,termination,srtf",
            "--name",
            "lab 7",
            "--adaptive",
            "protect_critical=true",
            "--json",
            str(js),
            "--plot",
            str(png),
            "--no-progress",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert text.startswith("workload lab 7: 20 jobs on 1 x 4 GPUs")
    for word in (
        "adaptive",
        "static",
        "termination",
        "srtf",
        "lower bound",
        "mean JCT vs static",
        "makespan vs termination",
    ):
        assert word in text
    data = json.loads(js.read_text())
    assert set(data["policies"]) == {"adaptive", "static", "termination", "srtf"}
    job = data["policies"]["adaptive"]["jobs"][0]
    assert set(job) >= {"job_id", "submit_s", "start_s", "finish_s", "jct_s"}
    assert data["lower_bound"]["makespan_s"] <= data["policies"]["adaptive"]["makespan_s"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--format", "pollux"], "--format pollux needs --workload"),
        (
            ["simulate", "--format", "pollux", "--workload", "workload-9"],
            "--workload workload-9: no such file, nor a shipped workload (shipped: "
            "sc20like-16gpu-24jobs, workload-1,",
        ),
        (["simulate", "--jobs", "missing.csv", "--profiles", "p.csv"], "cannot read the file"),
        (
            ["simulate", "--format", "philly", "--workload", "x.csv", "--policy", "fifo"],
            "unknown policy 'fifo'",
        ),
        (["workload", "generate", "--out", "o", "--gpu-mix", "1-0.5"], "--gpu-mix"),
        (
            ["simulate", "--format", "philly", "--adaptive", "protect=true"],
            "--adaptive 'protect=true': expected NAME=VALUE, NAME one of aging_s,",
        ),
        (
            ["simulate", "--format", "philly", "--adaptive", "protect_critical=maybe"],
            "protect_critical is true or false",
        ),
        (
            ["simulate", "--format", "philly", "--adaptive", "resize_budget=1.5"],
            "resize_budget is a whole number",
        ),
        (
            ["simulate", "--format", "philly", "--adaptive", "aging_s=-1"],
            "--adaptive: aging_s must not be negative",
        ),
        # Costs and times that would run (for hours) to a meaningless end, or fail mid-run.
        (
            ["simulate", "--format", "philly", "--batch-policy", "goodput"],
            "--batch-policy goodput needs --format pollux",
        ),
        (["simulate", "--format", "philly", "--tick", "nan"], "the tick must be a positive"),
        (["simulate", "--format", "philly", "--start-cost", "-3"], "the start cost must be 0 or"),
        (
            ["simulate", "--format", "philly", "--sidecar-cost", "-1"],
            "sidecar: a change's pause must be 0 or more seconds, got -1.0",
        ),
        (
            ["simulate", "--format", "philly", "--termination-cost", "nan"],
            "termination: a change's pause must be 0 or more seconds, got nan",
        ),
        (
            ["simulate", "--format", "philly", "--checkpoint-interval", "0"],
            "termination: the checkpoint interval must be a positive number of seconds",
        ),
    ],
)
def test_bad_input_ends_with_one_line(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def _simulate_stderr(tmp_path, terminal: bool) -> str:
    """What `simulate` writes to stderr (progress bars left on) into a pipe or a terminal."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    argv = [sys.executable, "-m", "jupyter_elastic_gpu.cli", "simulate", "--format", "pollux"]
    argv += ["--workload", "sc20like-16gpu-24jobs", "--policy", "static,adaptive"]
    if not terminal:
        run = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tmp_path)
        return run.stderr
    leader, follower = pty.openpty()
    # 24 x 100 characters: a terminal of size 0 x 0 gets bars of width 0
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=follower, cwd=tmp_path)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait() == 0
    return b"".join(chunks).decode()


def test_progress_bars_only_on_a_terminal(tmp_path):
    """Piped or logged, `simulate` leaves no carriage returns or half bars behind; on a
    terminal it draws them (so the first half of this test can fail)."""
    piped = _simulate_stderr(tmp_path, terminal=False)
    assert "\r" not in piped and "job/s" not in piped and "%|" not in piped, piped
    assert "\r" in _simulate_stderr(tmp_path, terminal=True)


def test_shipped_traces_by_name(tmp_path, monkeypatch, capsys):
    """The shipped Pollux workloads and Philly trace need no path (a clone or a pip install)."""
    monkeypatch.chdir(tmp_path)  # nothing here: the names can only mean the shipped data
    js = tmp_path / "r.json"
    argv = ["simulate", "--format", "pollux", "--workload", "sc20like-16gpu-24jobs"]
    argv += ["--policy", "static", "--no-progress", "--json", str(js)]
    assert main(argv) == 0
    assert "workload sc20like-16gpu-24jobs: 24 jobs on 4 x 4 GPUs" in capsys.readouterr().out
    assert len(json.loads(js.read_text())["policies"]["static"]["jobs"]) == 24
    assert main([*argv, "--batch-policy", "goodput"]) == 0
    jobs = json.loads(js.read_text())["policies"]["static"]["jobs"]
    assert len(jobs) == 24 and all(len(j["batches"]) == 1 for j in jobs)  # never resized
    argv = ["simulate", "--format", "philly", "--start", "2017-10-02 09:00", "--limit", "8"]
    argv += ["--app-traces", "pollux", "--policy", "static", "--no-progress"]
    assert main(argv) == 0
    assert "workload philly: 8 jobs" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "path", "message"),
    [
        (
            "--json",
            "no/such/r.json",
            "--json no/such/r.json: there is no folder no/such; create it",
        ),
        ("--plot", "no/such/r.png", "--plot no/such/r.png: there is no folder no/such; create it"),
        ("--plot", "r.txt", "--plot r.txt: its suffix says the format, one of"),
        ("--plot", "r", "--plot r: its suffix says the format"),
        ("--json", ".", "--json .: is a folder; name a file in it"),
    ],
)
def test_where_results_go_is_checked_before_the_run(flag, path, message, tmp_path, monkeypatch):
    """A mistyped output costs no run: the error comes before the workload is read (the table
    and the progress bars never start) and nothing is written anywhere."""
    monkeypatch.chdir(tmp_path)
    argv = [sys.executable, "-m", "jupyter_elastic_gpu.cli", "simulate", "--format", "pollux"]
    argv += ["--workload", "workload-6", "--policy", "static,adaptive", flag, path]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_bad_row_names_file_row_and_column(tmp_path, capsys):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,submit_time,user,profile,requested_gpus,min_gpus,max_gpus,work\na,0,u,p,1,1,2,-5\n"
    )
    prof = tmp_path / "profiles.csv"
    prof.write_text("profile,gpus,throughput\np,1,10\np,2,18\n")
    assert main(["simulate", "--jobs", str(jobs), "--profiles", str(prof), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "jobs.csv, row 1, column 'work'" in err


def test_jupyter_subcommand_and_console_script():
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip()
    jup = subprocess.run(["jupyter", "elastic-gpu", "--help"], capture_output=True, text=True)
    assert jup.returncode == 0 and "simulate" in jup.stdout


def test_make_simulate_gives_the_readme_s_generated_1_row(tmp_path):
    """`make simulate` replays the "generated 1" workload of docs/benchmarks.md with its settings:
    its figures are that row's ratios, to its two decimals (so they cannot drift apart)."""
    import shlex
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    demo = tmp_path / "demo"
    make = ["make", "-n", "simulate", f"PYTHON={sys.executable}", "PIP=true", f"DEMO={demo}"]
    text = subprocess.run(make, cwd=repo, capture_output=True, text=True, check=True).stdout
    commands = [c for c in text.replace("\\\n", " ").splitlines() if "jupyter_elastic_gpu.cli" in c]
    assert len(commands) == 2, text  # generate, then simulate
    for command in commands:
        subprocess.run(shlex.split(command), cwd=repo, capture_output=True, check=True)
    data = json.loads((demo / "comparison.json").read_text())
    s, lb = data["policies"], data["lower_bound"]
    ours = s["adaptive"]
    figures = [
        ours["makespan_s"] / s["static"]["makespan_s"],
        ours["mean_jct_s"] / s["static"]["mean_jct_s"],
        ours["makespan_s"] / s["termination"]["makespan_s"],
        ours["mean_jct_s"] / s["termination"]["mean_jct_s"],
        ours["mean_jct_s"] / s["termination-aware"]["mean_jct_s"],
        ours["makespan_s"] / lb["makespan_s"],
        ours["mean_jct_s"] / lb["mean_jct_s"],
        s["static"]["mean_jct_s"] / lb["mean_jct_s"],
    ]
    (row,) = [
        r
        for r in (repo / "docs" / "benchmarks.md").read_text().splitlines()
        if r.startswith("| generated 1")
    ]
    readme = [float(x) for x in re.findall(r"(\d+\.\d\d)x", row)]
    assert [round(f, 2) for f in figures] == readme, row
    assert (demo / "comparison.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("command", "listed"),
    [
        (["scheduler", "--help"], "--idle-connection-timeout"),
        (["scheduler", "--help-all"], "--dcgm-exporter"),
        (["hub-service", "--help"], "--activity-interval"),
    ],
)
def test_the_servers_help_lists_their_options(command, listed):
    """`scheduler --help-all` is what the top-level help points to: every option listed, no
    traceback (an alias to the server's own class once broke the whole help)."""
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert listed in out.stdout
