"""benchmarks/pollux_batch_sizes.py without the Pollux artifact: what it needs is said plainly.

(The artifact's own simulator needs pymoo 0.4 and about 40 minutes a run, so its figures are
measured by hand, with the command docs/benchmarks.md names, not in the tests.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize(
    ("simulator", "python", "workloads", "code", "says"),
    [
        ("", sys.executable, "nope", 2, "unknown workload nope; known: sc20like-16gpu-24jobs"),
        ("", "no-python", "workload-6", 1, "cannot run --python"),
        (
            "raise ImportError('No module named pymoo')\n",
            sys.executable,
            "workload-6",
            1,
            "the artifact's simulator failed (",
        ),
    ],
    ids=["unknown workload", "no interpreter", "simulator fails"],
)
def test_what_stops_a_run_is_said_without_a_traceback(
    tmp_path, simulator, python, workloads, code, says
):
    (tmp_path / "simulator.py").write_text(simulator)
    if python == "no-python":
        python = str(tmp_path / python)
    done = run("--artifact", str(tmp_path), "--python", python, "--workloads", workloads)
    assert done.returncode == code
    assert says in done.stderr
    assert "Traceback" not in done.stderr.split(says)[0]
    if simulator:
        assert "No module named pymoo" in done.stderr  # the simulator's own last lines


@pytest.mark.parametrize(
    ("runner", "beyond_the_standard_library"),
    [("_pollux_run.py", {"numpy"}), ("_sia_run.py", set())],
)
def test_an_artifact_s_runner_imports_nothing_of_ours(runner, beyond_the_standard_library):
    """The artifacts' runners run in the artifact's interpreter, which has none of our
    packages: an import of ours there fails every run (as one did: ``options.Parser``)."""
    imported = set()
    for node in ast.walk(ast.parse(SCRIPT.with_name(runner).read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == beyond_the_standard_library
