"""benchmarks/sia_compare.py without the Sia artifact: what it needs is said plainly, our side
reads the artifact's layout of measurements, and the whole run works end to end against a
stand-in artifact of a few lines.

(The artifact's own simulator needs cvxpy with CBC and pymoo 0.4, and tens of minutes a run,
so its figures are measured by hand, with the command benchmarks/README.md names, not here.)"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jupyter_elastic_gpu.sim.data import pollux_traces, trace_data

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "sia_compare.py"

WORKLOAD = """name,time,application,num_replicas,batch_size
cifar10-0,0,cifar10,2,256
cifar10-1,60,cifar10,1,128
cifar10-2,300,cifar10,4,512
"""

#: A stand-in for the artifact's modules that ``_sia_run.py`` imports: each run "finishes"
#: every job at once, 1000 s after it came, with one restart.
STAND_IN = {
    "simulator_config.py": """
        cluster_ngpus_per_node = {"aws": 4, "rtx": 8}
        cluster_nnodes = {"aws": 6, "rtx": 3}
        SLOWDOWNS = {"cifar10": 1.8}
        sia_solver_num_threads = 8
        sia_solver_verbose = True
        log_sched_decisions = False
        log_cluster_verbose = False
    """,
    "applications.py": """
        import types
        APPLICATIONS = {
            gpu: {"cifar10": types.SimpleNamespace(rescale_time=50)} for gpu in ("aws", "rtx")
        }
    """,
    "multi_simulator.py": """
        import csv
        import simulator_config

        Console = Table = None

        class Cluster:
            def all_complete(self):
                return True

        def multi_simulate(args):
            # its homogeneous cluster, or its own default (--heterogeneous)
            assert simulator_config.cluster_nnodes in ({"aws": 16}, {"aws": 6, "rtx": 3})
            print("every round, as the artifact does")
            with open(args.workload) as f:
                rows = list(csv.DictReader(f))
            jobs = [
                {"name": r["name"], "submission_time": float(r["time"]),
                 "completion_time": float(r["time"]) + 1000, "num_restarts": 1}
                for r in rows
            ]
            return [{"timestamp": 1500, "submitted_jobs": jobs}], {r["name"]: 1000.0 for r in rows}
    """,
    "cluster_unaware.py": """
        class ClusterUnaware:
            def __init__(self, *args, **kwargs):
                pass
            def get_unaware_job_info(self, job):
                return None
    """,
}
STAND_IN["multi_simulator_unaware.py"] = STAND_IN["multi_simulator.py"].replace(
    "class Cluster:", "from cluster_unaware import ClusterUnaware\n        class Cluster:"
)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def sia_compare():
    """The script as a module (its functions, tested one by one)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import sia_compare
    finally:
        sys.path.remove(str(BENCHMARKS))
    return sia_compare


@pytest.fixture
def artifact(tmp_path) -> Path:
    """A stand-in artifact in ``tmp_path/artifact``."""
    folder = tmp_path / "artifact"
    folder.mkdir()
    stand_in_artifact(folder)
    return folder


def stand_in_artifact(folder: Path, modules: dict[str, str] = STAND_IN) -> Path:
    """An artifact folder laid out as Sia's: the stand-in modules, one Philly workload, and
    cifar10's measurements (the shipped Pollux ones) under the artifact's per-GPU names, as
    its T4 ("aws") measurements and, twice as fast, its RTX 2080Ti ("rtx") ones."""
    for name, text in modules.items():
        (folder / name).write_text(textwrap.dedent(text))
    (folder / "workloads" / "philly").mkdir(parents=True)
    (folder / "workloads" / "philly" / "workload-1.csv").write_text(WORKLOAD)
    shipped = pollux_traces(trace_data()) / "cifar10"
    app = folder / "traces" / "cifar10"
    app.mkdir(parents=True)
    for entry in shipped.iterdir():
        if entry.name not in ("placements.csv", "scalability.csv"):
            shutil.copy(entry, app / entry.name)
            continue
        shutil.copy(entry, app / entry.name.replace(".csv", "-aws.csv"))
        with open(entry, newline="") as f:
            rows = list(csv.DictReader(f))
        with open(app / entry.name.replace(".csv", "-rtx.csv"), "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=list(rows[0]))
            out.writeheader()
            for row in rows:
                out.writerow(row | {c: float(row[c]) / 2 for c in ("step_time", "sync_time")})
    return folder


def test_a_folder_without_the_artifact_is_a_usage_error(tmp_path):
    done = run("--artifact", str(tmp_path), "--python", sys.executable)
    assert done.returncode == 2
    assert "has no multi_simulator.py: pass the artifact's sia-simulator/ folder" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("options", "code", "says"),
    [
        (["--workloads", "9"], 2, "--workloads: unknown workload '9'; known: 1..8"),
        (["--workloads", "2"], 2, "workload-2.csv: pass the artifact's sia-simulator/ folder"),
        (["--schedulers", "themis"], 2, "--schedulers: unknown themis; known: sia, sia-fixed"),
        (["--runs", "0"], 2, "must be a whole number of at least 1, got '0'"),
        (["--adaptive", "lookahead=maybe"], 2, "lookahead is true or false"),
        (["--python", "no-python"], 1, "cannot run --python"),
        (["--break"], 1, "the artifact's simulator failed (settings"),
    ],
    ids=[
        "unknown workload",
        "missing workload",
        "unknown scheduler",
        "no runs",
        "bad adaptive",
        "no python",
        "simulator fails",
    ],
)
def test_what_stops_a_run_is_said_without_a_traceback(tmp_path, options, code, says):
    modules = dict(STAND_IN)
    if "--break" in options:
        options = []
        modules["simulator_config.py"] = "raise ImportError('No module named cvxpy')\n"
    artifact = stand_in_artifact(tmp_path, modules)
    python = sys.executable
    if "--python" in options:
        python, options = str(tmp_path / "no-python"), []
    done = run("--artifact", str(artifact), "--python", python, "--workloads", "1", *options)
    assert done.returncode == code, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr.split(says)[0]
    if modules is not STAND_IN and "cvxpy" in modules["simulator_config.py"]:
        assert "No module named cvxpy" in done.stderr  # the simulator's own last lines


def test_a_whole_run_against_a_stand_in_artifact(tmp_path):
    artifact = stand_in_artifact(tmp_path)
    done = run("--artifact", str(artifact), "--python", sys.executable, "--workloads", "1")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("$ python benchmarks/sia_compare.py --artifact ")
    assert "cluster: 16 nodes x 4 aws GPUs" in out
    assert "ours, cifar10: Sia's aws measurements, times x1.8" in out
    assert "restart time: cifar10 50 s (the artifact's per application" in out
    for label in (
        "adaptive (ours), batch sizes fixed",
        "adaptive (ours), batch_policy=goodput",
        "Sia, batch sizes tuned (as published)",
        "Pollux (Sia's sim.), batch sizes fixed",
    ):
        assert label in out
    row = next(line for line in out.splitlines() if "Sia, batch sizes fixed" in line)
    assert row.split()[-4:-1] == ["1,000", "1,300", "1.00"]  # JCT, makespan, restarts/job
    assert "mean JCT, ours / theirs" in out and "geomean" in out


def test_a_whole_run_on_the_mixed_cluster_against_a_stand_in_artifact(tmp_path):
    artifact = stand_in_artifact(tmp_path)
    done = run(
        "--artifact", str(artifact), "--python", sys.executable, "--workloads", "1",
        "--heterogeneous", "--schedulers", "sia,gavel",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "--heterogeneous" in out.splitlines()[0]
    assert "cluster: 6 nodes x 4 aws, 3 nodes x 8 rtx GPUs (Sia's mixed cluster)" in out
    assert "ours, cifar10: Sia's aws, rtx measurements, times x1.8" in out
    for label in ("Sia, batch sizes tuned (as published)", "Gavel (Sia's sim.), batch sizes"):
        assert label in out
    assert "Pollux" not in out  # not asked for
    mine = [line.split() for line in out.splitlines() if "batch sizes fixed" in line]
    assert mine and mine[0][0] == "workload-1"


def test_the_artifact_measurements_in_our_layout(tmp_path, sia_compare, artifact):
    broken = artifact / "traces" / "bert"
    broken.mkdir()
    (broken / "placements-aws.csv").write_text("placement,local_bsz\n1,2\n")
    (broken / "scalability-aws.csv").write_text("num_nodes\n1\n")
    folder = tmp_path / "ours"
    folder.mkdir()
    used = sia_compare.traces_folder(artifact, "aws", ["bert", "cifar10"], {"cifar10": 1.8}, folder)
    assert used["cifar10"] == "Sia's aws measurements, times x1.8"
    assert used["bert"].startswith("the shipped Pollux measurements (Sia's unreadable: ")
    assert (folder / "bert").resolve() == (pollux_traces(trace_data()) / "bert").resolve()
    with open(artifact / "traces" / "cifar10" / "placements-aws.csv") as f:
        theirs = list(csv.DictReader(f))
    with open(folder / "cifar10" / "placements.csv") as f:
        mine = list(csv.DictReader(f))
    assert len(mine) == len(theirs)
    for a, b in zip(theirs, mine):
        assert float(b["step_time"]) == pytest.approx(1.8 * float(a["step_time"]))
        assert float(b["sync_time"]) == pytest.approx(1.8 * float(a["sync_time"]))
        assert b["placement"] == a["placement"] and b["local_bsz"] == a["local_bsz"]
    assert (folder / "cifar10" / "validation-128.csv").is_symlink()
    # without a slowdown the files are links to the artifact's
    plain = tmp_path / "plain"
    plain.mkdir()
    sia_compare.traces_folder(artifact, "aws", ["cifar10"], {}, plain)
    assert (plain / "cifar10" / "placements.csv").is_symlink()


def test_ours_charges_each_job_its_application_s_restart_time(
    tmp_path, monkeypatch, sia_compare, artifact
):
    csv_path = artifact / "workloads" / "philly" / "workload-1.csv"
    assert sia_compare.restart_times(csv_path, {"cifar10": 50, "bert": 120}) == {"cifar10": 50.0}
    assert sia_compare.restart_times(csv_path, {}) == {"cifar10": sia_compare.DEFAULT_RESTART_S}
    folder = tmp_path / "ours"
    folder.mkdir()
    sia_compare.traces_folder(artifact, "aws", ["cifar10"], {}, folder)
    kinds = [("aws", 16, 4)]
    quick, slow = (
        sia_compare.ours(csv_path, {"aws": folder}, "fixed", kinds, {"cifar10": t})
        for t in (50.0, 2000.0)
    )
    # Every job waits out at least its first start: 1,950 s more each, and its mean with it.
    assert slow["mean_jct_s"] >= quick["mean_jct_s"] + 1950.0
    # ``--adaptive`` reaches the policy (the stand-in's jobs all fit at once, so no setting
    # changes its run: the policy made is what is checked).
    made = []
    real = sia_compare.make_policy
    monkeypatch.setattr(
        sia_compare, "make_policy", lambda *a, **kw: made.append(kw) or real(*a, **kw)
    )
    params = {"lookahead": True, "makespan_weight": 0.5}
    sia_compare.ours(csv_path, {"aws": folder}, "fixed", kinds, {"cifar10": 50.0}, params)
    assert made == [params]


def test_ratios_and_their_geometric_mean(sia_compare):
    assert sia_compare.ratio(50.0, [100.0, 100.0]) == 0.5
    assert sia_compare.ratio(50.0, [None]) is None
    assert sia_compare.geomean([0.5, 2.0, None]) == pytest.approx(1.0)
    assert sia_compare.geomean([None]) is None
    assert sia_compare.workload_names("1,workload-2,1") == ["workload-1", "workload-2"]
    with pytest.raises(ValueError, match="unknown workload '0'"):
        sia_compare.workload_names("0")
