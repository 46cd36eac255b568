"""Every benchmark script refuses a bad option before it starts any work: a usage error that
names the option and what it takes, exit status 2, no traceback, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

CASES = [
    ("sweep", ["--seeds", "0"], "--seeds: must be a whole number of at least 1, got '0'"),
    ("sweep", ["--workers", "two"], "--workers: must be a whole number of at least 1, got 'two'"),
    ("sweep", ["--plot", "no/such/s.png"], "--plot no/such/s.png: there is no folder no/such"),
    ("sweep", ["--plot", "s.txt"], "--plot s.txt: its suffix says the format, one of"),
    ("mode_choice", ["--seeds", "0"], "--seeds: must be a whole number of at least 1, got '0'"),
    ("mode_choice", ["--variants", "greedy:1:1"], "variant 'greedy:1:1': expected defer|full|"),
    ("mode_choice", ["--variants", "defer:x:1"], "variant 'defer:x:1': SHARE and VALUE must be"),
    ("decision_speed", ["--repeat", "0"], "--repeat: must be a whole number of at least 1"),
    ("decision_speed", ["--philly-jobs", "-5"], "--philly-jobs: must be a whole number of at"),
    ("paper_comparison", ["--json", "no/such/p.json"], "--json no/such/p.json: there is no"),
    ("paper_comparison", ["--plot-dir", "taken"], "--plot-dir taken: is a file; name a folder"),
    (
        "paper_comparison",
        ["--plot-dir", "taken", "--json", "taken/p.json"],
        "--plot-dir taken: is a file; name a folder",
    ),
    ("live_comparison", ["--time-scale", "0"], "--time-scale: must be a finite number above 0"),
    ("live_comparison", ["--scale", "nan"], "--scale: must be a finite number above 0"),
    ("live_comparison", ["--jobs", "0"], "--jobs: must be a whole number of at least 1"),
    ("resize_overhead", ["--settle", "-1"], "--settle: must be a finite number above 0"),
    ("resize_overhead", ["--frameworks", "keras,jax"], "--frameworks: must be one or more of"),
    ("resize_overhead", ["--frameworks", ""], "--frameworks: must be one or more of"),
    ("resize_overhead", ["--frameworks", "lightning,lightning"], "--frameworks: must be one or"),
    ("api_load", ["--duration", "inf"], "--duration: must be a finite number above 0"),
    ("audit", ["--seeds", "1,x"], "--seeds: must be whole numbers separated by commas"),
    ("fuzz_audit", ["--examples", "0"], "--examples: must be a whole number of at least 1"),
    ("cluster_overhead", ["--rounds", "0"], "--rounds: must be a whole number of at least 1"),
    ("fair_share", ["--repeat", "0"], "--repeat: must be a whole number of at least 1"),
    ("panel_update", ["--gpus", "0"], "--gpus: must be a whole number of at least 1"),
    ("gpu_nvml_check", ["--repeat", "0"], "--repeat: must be a whole number of at least 1"),
    ("gpu_resize_check", ["--settle", "0"], "--settle: must be a finite number above 0"),
    ("gpu_torch_check", ["--settle", "0"], "--settle: must be a finite number above 0"),
    (
        "pollux_batch_sizes",
        ["--artifact", "a", "--python", "p", "--workers", "0"],
        "--workers: must be a whole number of at least 1",
    ),
]


@pytest.mark.parametrize(
    ("script", "args", "message"), CASES, ids=[f"{s} {' '.join(a)}" for s, a, _ in CASES]
)
def test_a_bad_option_is_a_usage_error_before_any_work(script, args, message, tmp_path):
    (tmp_path / "taken").write_text("")
    run = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{script}.py"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{script}.py: error: ") and message in last, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]
