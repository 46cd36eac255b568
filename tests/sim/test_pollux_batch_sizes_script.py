"""benchmarks/pollux_batch_sizes.py without the Pollux artifact: what it needs is said plainly.

(The artifact's own simulator needs pymoo 0.4 and about 40 minutes a run, so its figures are
measured by hand, with the command the README names, not in the tests.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "pollux_batch_sizes.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def test_a_folder_without_the_artifact_is_a_usage_error(tmp_path):
    done = run("--artifact", str(tmp_path), "--python", sys.executable)
    assert done.returncode == 2
    assert "has no simulator.py: pass the artifact's simulator/ folder" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_workload_names_the_known_ones(tmp_path):
    (tmp_path / "simulator.py").write_text("")
    done = run("--artifact", str(tmp_path), "--python", sys.executable, "--workloads", "nope")
    assert done.returncode == 2
    assert "unknown workload nope; known: sc20like-16gpu-24jobs, workload-6" in done.stderr


def test_an_interpreter_that_cannot_run_says_so(tmp_path):
    (tmp_path / "simulator.py").write_text("")
    missing = str(tmp_path / "no-python")
    done = run("--artifact", str(tmp_path), "--python", missing, "--workloads", "workload-6")
    assert done.returncode == 1
    assert f"cannot run --python {missing}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_simulator_that_fails_shows_its_last_lines(tmp_path):
    (tmp_path / "simulator.py").write_text("raise ImportError('No module named pymoo')\n")
    done = run("--artifact", str(tmp_path), "--python", sys.executable, "--workloads", "workload-6")
    assert done.returncode == 1
    assert "the artifact's simulator failed" in done.stderr
    assert "No module named pymoo" in done.stderr
