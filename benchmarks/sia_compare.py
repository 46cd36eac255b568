"""Sia, Pollux and Gavel as the Sia artifact's own simulator runs them, beside our ``adaptive``,
on Sia's Philly workloads, on its homogeneous 64-GPU cluster or (``--heterogeneous``) its mixed
one.

Sia (Jayaram Subramanya et al., SOSP 2023) ships a simulator that grew out of Pollux's; its
homogeneous experiment runs 16 nodes of 4 T4 GPUs ("aws": the line
``cluster_nnodes = {"aws": 16}`` its ``simulator_config.py`` leaves commented out, set here at
run time by ``_sia_run.py``), its heterogeneous one the cluster that file sets "for
experiments": 6 nodes of 4 T4 ("aws"), 2 of 8 A100 ("dgx-ext") and 3 of 8 RTX 2080Ti ("rtx"),
64 GPUs; both on ``workloads/philly/workload-1..8.csv`` (160 jobs each, over 8 hours) with 60 s
rounds. This script runs, in one go, per workload:

* Sia as published (``multi_simulator.py --policy=sia``, ``run_experiment.sh``'s settings:
  p=-0.5, lambda_a=0.01, lambda_n=1.1, ``--project_throughputs --share_max_replicas``) and with
  its batch-size tuning off (the artifact's ``--disable_bsz_tuning``);
* Pollux as Sia's simulator runs it (``multi_simulator_unaware.py --policy=pollux
  --policy_p_val=-1``: blind to the kinds of GPU), batch sizes tuned, and with every job at its
  row's batch size (fixed as the artifact fixes Sia's: it has no switch for Pollux; see
  ``_sia_run.py``);
* Gavel (``multi_simulator.py --policy=gavel``, 360 s rounds as ``run_experiment.sh`` runs it,
  batch sizes fixed), where ``--schedulers`` names it;
* ours, ``adaptive`` in our simulator, with batch sizes fixed and with
  ``batch_policy="goodput"`` (a batch chosen at each restart), on the same cluster, with the
  same application measurements: Sia's per-kind ``placements-<kind>.csv`` and
  ``scalability-<kind>.csv`` under our names in a temporary folder per kind (an application
  whose files ours cannot read falls back to the shipped Pollux measurements; the output says
  which), with step times multiplied by the slowdown the artifact's jobs run at (its
  ``SLOWDOWNS``: cifar10 1.8, others 1.2; ``--no-slowdown`` leaves them out), and each job's
  (re)starts as long as the artifact's for its application (cifar10 50 s, bert 120 s,
  imagenet 250 s, ...; ``DEFAULT_RESTART_S`` for one it lists none for), the first start
  included, the policy told each job's own. On
  the mixed cluster each job's speed on each kind is what Sia's traces measured there, and
  our policy is told the job's speed on one GPU of each kind before it runs there (as Sia
  profiles each job on each kind), then what it measures.

Restarts per job: the artifact's ``num_restarts`` (each new allocation after a job's first)
and our ``resizes`` (each change of a running job's GPUs, its suspension included), over the
workload's jobs: the same count, a suspend and resume being one.

Needs the artifact and a Python with its requirements (CBC through cylp for Sia's MIP; its
pins are for Python 3.10, on 3.11 these versions install as wheels and run it). The artifact
has no licence file: nothing of it is copied here, it is read from ``--artifact`` at run time.
Timed on one core of a shared 2-core machine (niced), workload-1: Sia 7.4 minutes for its
1,437 rounds, ours 1.5 minutes per batch policy; Pollux is slower (2-4 s a round while many
jobs wait: 22 s for the first 10 rounds with batch sizes fixed, over 5.5 minutes for the
first 90 tuned). On the mixed cluster (``--heterogeneous``, two at once, niced): Sia 17
minutes a workload, with batch sizes fixed 2-3.5 minutes, Gavel 1-1.5 minutes; ours 20-40 s.
``--schedulers`` picks the artifact's runs (by default Sia's and Pollux's; Gavel's where named),
``--limit-s`` cuts them short.

    git clone https://github.com/siasosp23/artifacts sia-artifacts
    python3.11 -m venv sia-env
    sia-env/bin/pip install "numpy~=1.23.0" "pandas<2" "scipy<1.12" pymoo==0.4.2.1 rich \
        "cvxpy<1.5" cylp psutil
    python benchmarks/sia_compare.py --artifact sia-artifacts/sia-simulator \
        --python sia-env/bin/python [--heterogeneous] [--workloads 1,2] \
        [--schedulers sia,pollux-fixed,gavel] [--runs 1] [--workers 1] \
        [--adaptive lookahead=true]
"""

from __future__ import annotations

import csv
import json
import math
import signal
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _artifacts import ArtifactError, artifact_run, collect
from _common import adaptive_params, add_adaptive_option, command_line, positive, trace_data, whole
from tqdm import tqdm

from jupyter_elastic_gpu.core.mechanism import Mechanism
from jupyter_elastic_gpu.core.policies import make_policy
from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.sim.data import pollux_traces
from jupyter_elastic_gpu.sim.engine import SimConfig, simulate
from jupyter_elastic_gpu.sim.traces.pollux import Application, read_pollux
from jupyter_elastic_gpu.sim.workload import TraceError

RUNNER = Path(__file__).with_name("_sia_run.py")
WORKLOADS = [f"workload-{i}" for i in range(1, 9)]
#: The artifact's runs, in the order shown: (mode of ``_sia_run.py``, label).
THEIRS = (
    ("sia", "Sia, batch sizes tuned (as published)"),
    ("sia-fixed", "Sia, batch sizes fixed"),
    ("pollux", "Pollux (Sia's sim.), batch sizes tuned"),
    ("pollux-fixed", "Pollux (Sia's sim.), batch sizes fixed"),
    ("gavel", "Gavel (Sia's sim.), batch sizes fixed"),
)
#: Per-GPU batch caps below what the traces measured, as Sia's simulator sets them
#: (``applications.py``): {(application, kind): largest per-GPU batch}. Elsewhere it takes each
#: kind's largest measured one; so does ours here, without the Pollux artifact's YOLOv3 cap of
#: 8 that ours applies to the Pollux traces (``APPLICATION_LIMITS``).
SIA_CAPS: dict[tuple[str, str], int] = {("deepspeech2", "rtx"): 57}
#: The artifact's runs made unless ``--schedulers`` says otherwise.
DEFAULT_THEIRS = ("sia", "sia-fixed", "pollux", "pollux-fixed")
#: Ours: (``batch_policy`` of ``read_pollux``, label).
OURS = (
    ("fixed", "adaptive (ours), batch sizes fixed"),
    ("goodput", "adaptive (ours), batch_policy=goodput"),
)


def sia_run(python: str, artifact: Path, what: str, *args: str) -> dict:
    """One run of ``_sia_run.py`` in the artifact's interpreter; ``what`` names it in errors."""
    return artifact_run(python, RUNNER, [str(artifact), *args], what)


def _terminated(signum, frame):
    raise KeyboardInterrupt


def workload_names(text: str) -> list[str]:
    """``1,2`` or ``workload-1,workload-2`` as workload names; ValueError names a bad one."""
    names = []
    for item in text.split(","):
        item = item.strip()
        name = f"workload-{item}" if item.isdigit() else item
        if name not in WORKLOADS:
            raise ValueError(f"unknown workload {item!r}; known: 1..{len(WORKLOADS)}")
        if name not in names:
            names.append(name)
    return names


def applications(csvs: list[Path]) -> list[str]:
    """The applications the workloads' rows name, sorted."""
    found = set()
    for path in csvs:
        with open(path, newline="") as f:
            found.update(row["application"] for row in csv.DictReader(f))
    return sorted(found)


def _scaled(source: Path, target: Path, factor: float, cap: int | None = None) -> None:
    """``source`` with its step and all-reduce times multiplied by ``factor``, without the
    rows of a per-GPU batch above ``cap``."""
    with open(source, newline="") as f:
        rows = list(csv.DictReader(f))
        fields = list(rows[0]) if rows else []
    with open(target, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=fields)
        out.writeheader()
        for row in rows:
            if cap is not None and float(row["local_bsz"]) > cap:
                continue
            for column in ("step_time", "sync_time"):
                row[column] = repr(float(row[column]) * factor)
            out.writerow(row)


def traces_folder(
    artifact: Path, gpu: str, apps: list[str], slowdown: dict[str, float], folder: Path
) -> dict[str, str]:
    """Fill ``folder`` with one sub-folder per application, in our layout, from the
    artifact's measurements on ``gpu`` (``placements-<gpu>.csv`` as ``placements.csv`` ...),
    times multiplied by ``slowdown`` (1 where absent: then a link), without the per-GPU
    batches above Sia's own caps (``SIA_CAPS``). An application ours
    cannot read so gets the shipped Pollux measurements instead. Returns {application: what
    was used}."""
    used = {}
    for app in apps:
        source, target = artifact / "traces" / app, folder / app
        target.mkdir()
        factor = slowdown.get(app, 1.0)
        cap = SIA_CAPS.get((app, gpu))
        try:
            for name in ("placements", "scalability"):
                measured = source / f"{name}-{gpu}.csv"
                if not measured.is_file():
                    raise TraceError(str(measured), "missing")
                if factor == 1.0 and cap is None:
                    (target / f"{name}.csv").symlink_to(measured.resolve())
                else:
                    _scaled(measured, target / f"{name}.csv", factor, cap)
            for validation in sorted(source.glob("validation-*.csv")):
                (target / validation.name).symlink_to(validation.resolve())
            Application(str(target))
            used[app] = (
                f"Sia's {gpu} measurements"
                + (f", times x{factor:g}" if factor != 1 else "")
                + (f", at most {cap} a GPU" if cap is not None else "")
            )
        except (TraceError, OSError, ValueError, KeyError) as e:
            for entry in target.iterdir():
                entry.unlink()
            target.rmdir()
            shipped = pollux_traces(trace_data()) / app
            if not shipped.is_dir():
                raise ArtifactError(
                    f"ours cannot read Sia's measurements of {app} ({e}) and ships none"
                ) from None
            target.symlink_to(shipped.resolve())
            used[app] = f"the shipped Pollux measurements (Sia's unreadable: {e})"
    return used


def measurements(said: dict[str, str]) -> str:
    """What one application's measurements were, per kind, said once where they agree:
    ``Sia's aws, rtx measurements, times x1.8``."""
    own = {kind: what.startswith(f"Sia's {kind} measurements") for kind, what in said.items()}
    tails = {what.split(" measurements", 1)[1] for what in said.values()}
    if all(own.values()) and len(tails) == 1:
        return f"Sia's {', '.join(said)} measurements{tails.pop()}"
    return "; ".join(f"{kind}: {what}" for kind, what in said.items())


#: The restart time the artifact charges an application it lists none for (``job.py``).
DEFAULT_RESTART_S = 30.0


def restart_times(csv_path: Path, restart_s: dict[str, float]) -> dict[str, float]:
    """The artifact's restart time of each application of the workload (first start included)."""
    with open(csv_path, newline="") as f:
        apps = {row["application"] for row in csv.DictReader(f)}
    return {app: float(restart_s.get(app, DEFAULT_RESTART_S)) for app in sorted(apps)}


def ours(
    csv_path: Path,
    folders: dict[str, Path],
    batch_policy: str,
    kinds: list[tuple[str, int, int]],
    restart: dict[str, float],
    params: dict | None = None,
) -> dict:
    """Our ``adaptive`` (with ``params``, ``--adaptive``) in our simulator, in the artifact's
    settings (as ``pollux_batch_sizes.py`` runs it): 60 s rounds, each (re)start of a job as
    long as ``restart`` says of its application, on nodes of ``kinds`` ((kind, nodes, GPUs per
    node) each), each kind's measurements in ``folders``."""
    total = sum(nodes * per_node for _, nodes, per_node in kinds)
    traces = {kind: str(folders[kind]) for kind, _, _ in kinds}
    wl = read_pollux(
        str(csv_path),
        traces if len(kinds) > 1 else traces[kinds[0][0]],
        kinds[0][2],
        total,
        batch_policy=batch_policy,
        limits={},  # each kind's traces say (SIA_CAPS)
        restart_s=restart,
    )
    if len(kinds) > 1:
        cluster = {"kinds": tuple(kinds)}
    else:
        cluster = {"nodes": kinds[0][1], "gpus_per_node": kinds[0][2]}
    # (every job has its own restart time: the run's below is never charged)
    cfg = SimConfig(**cluster, tick_s=60, rounds=True, start_cost_s=DEFAULT_RESTART_S)
    policy = make_policy("adaptive", **(params or {}))
    result = simulate(wl, policy, Mechanism("restart", DEFAULT_RESTART_S), cfg)
    s = result.summary()
    return {
        "mean_jct_s": float(s["mean_jct_s"]),
        "makespan_s": float(s["makespan_s"]),
        "restarts_per_job": result.resizes / len(wl.jobs),
    }


def _figure(values: list, digits: int = 0) -> str:
    """One figure, or the range of several runs; '-' where none."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    one = f"{lo:,.{digits}f}"
    return one if one == f"{hi:,.{digits}f}" else f"{one}-{hi:,.{digits}f}"


def ratio(mine: float | None, theirs: list) -> float | None:
    """Ours over the mean of the artifact's runs; None where either is missing."""
    theirs = [t for t in theirs if t is not None]
    if mine is None or not theirs or statistics.mean(theirs) <= 0:
        return None
    return mine / statistics.mean(theirs)


def geomean(values: list) -> float | None:
    """The geometric mean of the ratios there are (None if none)."""
    values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return statistics.geometric_mean(values) if values else None


def table(rows: list[list[str]], left: int = 2) -> str:
    """Columns padded (the first ``left`` to the left), a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, r in enumerate(rows):
        lines.append(
            "  ".join(
                c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
            ).rstrip()
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ratio_rows(names, theirs, results, mine, metric: str) -> list[list[str]]:
    """Rows of ours / theirs for ``metric`` per workload, and their geometric mean."""
    rows = [["ours", "/ theirs", *names, "geomean"]]
    for policy, label in OURS:
        for mode, their_label in theirs:
            found = [
                ratio(mine[(n, policy)][metric], [r[metric] for r in results[(n, mode)]])
                for n in names
            ]
            rows.append(
                [
                    label.removeprefix("adaptive (ours), "),
                    their_label,
                    *("-" if x is None else f"{x:.2f}" for x in found),
                    "-" if geomean(found) is None else f"{geomean(found):.2f}",
                ]
            )
    return rows


def main() -> None:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", required=True, help="the artifact's sia-simulator/ folder")
    ap.add_argument("--python", required=True, help="an interpreter with the artifact's needs")
    ap.add_argument("--runs", type=whole(), default=1, help="artifact runs per workload and mode")
    ap.add_argument(
        "--workloads",
        default=",".join(str(i) for i in range(1, len(WORKLOADS) + 1)),
        help=f"which Philly workloads, of 1..{len(WORKLOADS)} (e.g. 1,2)",
    )
    ap.add_argument(
        "--schedulers",
        default=",".join(DEFAULT_THEIRS),
        help=f"the artifact's runs to make, of {', '.join(mode for mode, _ in THEIRS)}",
    )
    ap.add_argument(
        "--heterogeneous",
        action="store_true",
        help="the artifact's mixed cluster (T4, A100, RTX 2080Ti), not its 16 x 4 T4",
    )
    ap.add_argument("--workers", type=whole(), default=1, help="artifact runs at once")
    ap.add_argument("--threads", type=whole(), default=1, help="CBC threads per Sia run")
    ap.add_argument(
        "--limit-s",
        type=positive,
        help="stop the artifact's runs after this many simulated seconds (to time them; "
        "their figures are then of the jobs finished, and nothing is compared)",
    )
    ap.add_argument(
        "--no-slowdown",
        action="store_true",
        help="ours at the measured speeds, not slowed as the artifact slows its jobs",
    )
    add_adaptive_option(ap)
    args = ap.parse_args()
    params = adaptive_params(ap, args.adaptive)
    artifact = Path(args.artifact)
    if not (artifact / "multi_simulator.py").is_file():
        ap.error(f"{artifact} has no multi_simulator.py: pass the artifact's sia-simulator/ folder")
    try:
        names = workload_names(args.workloads)
    except ValueError as e:
        ap.error(f"--workloads: {e}")
    modes = [m.strip() for m in args.schedulers.split(",") if m.strip()]
    unknown = sorted(set(modes) - {mode for mode, _ in THEIRS})
    if unknown or not modes:
        ap.error(
            f"--schedulers: unknown {', '.join(unknown) or 'none given'}; "
            f"known: {', '.join(mode for mode, _ in THEIRS)}"
        )
    theirs = [(mode, label) for mode, label in THEIRS if mode in modes]
    csvs = {n: artifact / "workloads" / "philly" / f"{n}.csv" for n in names}
    missing = [str(p) for p in csvs.values() if not p.is_file()]
    if missing:
        ap.error(f"no {', '.join(missing)}: pass the artifact's sia-simulator/ folder")
    print(f"$ {command_line()}\n")
    cluster = ["--heterogeneous"] if args.heterogeneous else []
    try:
        settings = sia_run(args.python, artifact, "settings", "--describe", *cluster)
    except ArtifactError as e:
        sys.exit(f"benchmark: {e}")
    kinds = [(str(kind), int(nodes), int(per_node)) for kind, nodes, per_node in settings["kinds"]]
    slowdown = {} if args.no_slowdown else settings["slowdown"]
    extra = ["--threads", str(args.threads), *cluster]
    if args.limit_s:
        extra += ["--limit-s", repr(args.limit_s)]
    signal.signal(signal.SIGTERM, _terminated)  # a kill stops the artifact's runs too
    tasks = [(n, mode) for n in names for mode, _ in theirs for _ in range(args.runs)]
    with ThreadPoolExecutor(args.workers) as pool:
        futures = {
            pool.submit(
                sia_run, args.python, artifact, f"{mode}, {n}", str(csvs[n]), mode, *extra
            ): (n, mode)
            for n, mode in tasks
        }

        def said(key, found):  # kept in the output if the run is cut short
            tqdm.write(f"done: {key[1]}, {key[0]}: {json.dumps(found)}")
            sys.stdout.flush()

        results = collect(futures, said)
    mine: dict[tuple[str, str], dict] = {}
    # The same restart times on every kind in the artifact: the first kind's.
    restart = {n: restart_times(csvs[n], settings["restart_s"][kinds[0][0]]) for n in names}
    apps = applications(list(csvs.values()))
    with tempfile.TemporaryDirectory(prefix="sia-traces-") as tmp:
        folders, used = {}, {}
        for kind, _, _ in kinds:
            folders[kind] = Path(tmp) / kind
            folders[kind].mkdir()
            used[kind] = traces_folder(artifact, kind, apps, slowdown, folders[kind])
        if not args.limit_s:
            for n, policy in tqdm(
                [(n, p) for n in names for p, _ in OURS], desc="our runs", leave=False
            ):
                mine[(n, policy)] = ours(csvs[n], folders, policy, kinds, restart[n], params)
    layout = ", ".join(f"{nodes} nodes x {per_node} {kind}" for kind, nodes, per_node in kinds)
    which = "mixed" if len(kinds) > 1 else "homogeneous"
    print(f"cluster: {layout} GPUs (Sia's {which} cluster), 60 s rounds")
    for app in apps:
        said = {kind: found[app] for kind, found in used.items()}
        print(f"ours, {app}: {measurements(said)}")
    times = {app: t for n in names for app, t in restart[n].items()}
    print(
        "ours, restart time: "
        + ", ".join(f"{app} {t:g} s" for app, t in sorted(times.items()))
        + " (the artifact's per application, each start and restart)\n"
    )
    rows = [["workload", "scheduler", "mean JCT s", "makespan s", "restarts/job", "wall s"]]
    for n in names:
        for policy, label in OURS:
            if (n, policy) in mine:
                m = mine[(n, policy)]
                rows.append(
                    [
                        n,
                        label,
                        _figure([m["mean_jct_s"]]),
                        _figure([m["makespan_s"]]),
                        _figure([m["restarts_per_job"]], 2),
                        "",
                    ]
                )
        for mode, label in theirs:
            runs = results[(n, mode)]
            partial = any(r["partial"] for r in runs)
            note = f" ({len(runs)} runs)" if len(runs) > 1 else ""
            if partial:
                note += f" [first {runs[0]['simulated_s']:,} s: {runs[0]['finished']} jobs done]"
            rows.append(
                [
                    n,
                    label + note,
                    _figure([r["mean_jct_s"] for r in runs]),
                    _figure([r["makespan_s"] for r in runs]),
                    _figure([r["restarts_per_job"] for r in runs], 2),
                    _figure([r["wall_s"] for r in runs]),
                ]
            )
    print(table(rows))
    if args.limit_s:
        print("\n--limit-s: the artifact's runs were cut short, so nothing is compared")
        return
    for metric, title in (
        ("mean_jct_s", "mean JCT"),
        ("makespan_s", "makespan"),
        ("restarts_per_job", "restarts per job"),
    ):
        print(f"\n{title}, ours / theirs (below 1: ours is lower)")
        print(table(ratio_rows(names, theirs, results, mine, metric)))
    print("\nratios: ours over the mean of the artifact's runs; geomean over the workloads run")


if __name__ == "__main__":
    main()
