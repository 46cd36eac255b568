"""``python -m elastic_gpu_sidecar run|resize|suspend|cancel|status``.

``run`` supervises a job (usable without any scheduler); the other commands only write the
desired grant to ``grant.json`` and nudge the running sidecar, so they return at once and
work the same way the live scheduler does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import time
from pathlib import Path

from . import protocol as P
from .jobdir import JobDir, now_iso, read_json


def _gpus(text: str) -> list[str]:
    try:
        gpus = P.parse_gpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not gpus:
        raise argparse.ArgumentTypeError("at least one GPU id is needed")
    return gpus


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m elastic_gpu_sidecar",
        description="Run an unmodified Keras script as an elastic job (resizable GPU count).",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)

    run = sub.add_parser("run", help="run a job under supervision (exit code: see docs)")
    run.add_argument("--job-dir", required=True, help="directory holding the job's files")
    run.add_argument("--gpus", type=_gpus, help="GPU ids, e.g. 0,1 (default: the job's last)")
    run.add_argument(
        "--simulated", action="store_true", help="GPU ids are labels: as many logical CPU devices"
    )
    run.add_argument("--generation", type=int, help="grant generation to start with")
    run.add_argument("--epochs", type=_positive(int), help="override the epochs of every fit()")
    run.add_argument(
        "--checkpoint-interval",
        type=_positive(float),
        default=P.DEFAULT_CHECKPOINT_INTERVAL_S,
        metavar="S",
        help="seconds between periodic checkpoints (they bound the work lost on a crash)",
    )
    run.add_argument(
        "--batch-policy", choices=P.BatchPolicy.values(), default=P.BatchPolicy.KEEP_GLOBAL.value
    )
    run.add_argument("--lr-warmup-steps", type=int, default=100, metavar="N")
    run.add_argument(
        "--measure-noise",
        action="store_true",
        help="measure the gradient noise scale (Keras on TensorFlow) and report it with progress",
    )
    run.add_argument(
        "--framework",
        choices=P.Framework.values(),
        default=P.Framework.AUTO.value,
        help="the script's framework adapter (auto: read from its imports)",
    )
    run.add_argument("--mechanism", choices=P.Mechanism.values(), default=P.Mechanism.SIDECAR.value)
    run.add_argument("--max-restarts", type=int, default=3, metavar="K")
    run.add_argument("--stop-timeout", type=_positive(float), default=120.0, metavar="S")
    run.add_argument("--backoff", type=float, default=1.0, metavar="S", help="first retry delay")
    run.add_argument(
        "--standby",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep a spare interpreter with TensorFlow imported to shorten resizes (default on)",
    )
    run.add_argument("--synthetic", action="store_true", help="run the synthetic workload")
    run.add_argument("--profile", help="synthetic: GPUS:SAMPLES_PER_S,...")
    run.add_argument("--work", type=_positive(int), help="synthetic: samples in total")
    run.add_argument("--time-scale", type=_positive(float), default=1.0)
    run.add_argument("--batch", type=_positive(int), default=32, help="synthetic: step size")
    run.add_argument(
        "--save-seconds",
        type=float,
        default=0.0,
        metavar="S",
        help="synthetic: seconds each checkpoint takes to write",
    )
    run.add_argument("--scheduler-url", help=f"heartbeat endpoint (secret: ${P.ENV_SECRET})")
    run.add_argument("--job-id", help="job id reported to the scheduler")
    run.add_argument(
        "--heartbeat", type=_positive(float), default=P.DEFAULT_HEARTBEAT_INTERVAL_S, metavar="S"
    )
    run.add_argument(
        "--final-linger",
        type=float,
        default=P.FINAL_HEARTBEAT_LINGER_S,
        metavar="S",
        help="once ended, keep sending the last heartbeat this long while the scheduler does "
        "not answer",
    )
    run.add_argument("--fresh", action="store_true", help="discard this job dir's previous state")
    run.add_argument("--quiet", action="store_true", help="do not echo events to stderr")
    run.add_argument(
        "--die-with-parent",
        type=int,
        metavar="PID",
        help="end (with the trainer) when process PID, the one that started this sidecar, "
        "ends: a sidecar that a cluster's worker process started must not outlive it",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- script.py [args]")

    resize = sub.add_parser("resize", help="ask a running job to move to other GPUs")
    resize.add_argument("--job-dir", required=True)
    resize.add_argument("--gpus", type=_gpus, required=True)

    for name, text in (
        ("cancel", "checkpoint and stop for good"),
        ("suspend", "checkpoint and stop, resumable"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--job-dir", required=True)
        p.add_argument("--wait", action="store_true", help="wait until the sidecar has exited")

    status = sub.add_parser("status", help="print the job's status")
    status.add_argument("--job-dir", required=True)
    status.add_argument("--json", action="store_true", help="print status.json as is")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return {
            "run": cmd_run,
            "resize": cmd_resize,
            "cancel": cmd_stop,
            "suspend": cmd_stop,
            "status": cmd_status,
        }[args.cmd](args, parser)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return P.EXIT_USAGE


# -- run ----------------------------------------------------------------------------------------
_STATE_FILES = (
    P.STATUS,
    P.GRANT,
    P.LEGACY_GRANT,
    P.RESULT,
    P.PROGRESS,
    *P.MODELS,
    P.JOB,
    P.TRAINER_ERROR,
    P.LIVE,
)


def _fresh(job: JobDir) -> None:
    shutil.rmtree(job / P.CHECKPOINTS, ignore_errors=True)
    for name in _STATE_FILES:
        with contextlib.suppress(FileNotFoundError):
            if (job / name).is_dir() and not (job / name).is_symlink():
                shutil.rmtree(job / name)
            else:
                os.unlink(job / name)


def _command(args, parser, job: JobDir) -> dict:
    """What the job runs, merged with the job's previous job.json so a resume stays exact."""
    prev = read_json(job / P.JOB) if (job / P.JOB).exists() else None
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.synthetic:
        if not args.profile or not args.work:
            parser.error("--synthetic needs --profile and --work")
        from .trainer.synthetic import parse_profile

        parse_profile(args.profile)
        new = {
            "kind": P.JobKind.SYNTHETIC.value,
            "profile": args.profile,
            "work": args.work,
            "time_scale": args.time_scale,
            "batch": args.batch,
        }
        if args.save_seconds > 0:
            new["save_s"] = args.save_seconds
    elif cmd:
        script = Path(cmd[0])
        if not script.is_file():
            parser.error(f"script not found: {cmd[0]}")
        new = {
            "kind": P.JobKind.SCRIPT.value,
            "script": str(script.resolve()),
            "args": cmd[1:],
            "framework": args.framework,
        }
    elif isinstance(prev, dict):
        new = {
            k: prev[k]
            for k in (
                "kind",
                "script",
                "args",
                "framework",
                "profile",
                "work",
                "time_scale",
                "batch",
                "save_s",
            )
            if k in prev
        }
    else:
        parser.error("nothing to run: give -- script.py [args], or --synthetic")
    same = isinstance(prev, dict) and all(prev.get(k) == v for k, v in new.items())
    if isinstance(prev, dict) and not same:
        raise ValueError(
            f"{job.path} holds another job ({prev.get('script') or prev.get('profile')}); "
            "use a new --job-dir, or --fresh to discard it"
        )
    new.update(
        cwd=(prev or {}).get("cwd", os.getcwd()) if same else os.getcwd(),
        epochs=args.epochs,
        checkpoint_interval=args.checkpoint_interval,
        batch_policy=args.batch_policy,
        lr_warmup_steps=args.lr_warmup_steps,
        measure_noise=bool(args.measure_noise),
        seed=(prev or {}).get("seed") if same else random.randrange(1 << 31),
        simulated=args.simulated or bool(same and (prev or {}).get("simulated")),
        reference_replicas=(prev or {}).get("reference_replicas") if same else None,
        created_at=(prev or {}).get("created_at", time.time()),
    )
    return new


def cmd_run(args, parser) -> int:
    if args.die_with_parent:
        from .procs import die_with_parent

        die_with_parent(args.die_with_parent)
    from .options import Options
    from .supervisor import Sidecar

    job = JobDir(args.job_dir)
    job.path.mkdir(parents=True, exist_ok=True)
    if args.fresh:
        _fresh(job)
    command = _command(args, parser, job)
    if command["reference_replicas"] is None:
        if not args.gpus:
            parser.error("--gpus is required for a new job")
        command["reference_replicas"] = len(args.gpus)
    if args.scheduler_url and not os.environ.get(P.ENV_SECRET):
        print(
            f"warning: {P.ENV_SECRET} is not set; the scheduler may reject heartbeats",
            file=sys.stderr,
        )
    opts = Options(
        job_dir=args.job_dir,
        gpus=args.gpus,
        generation=args.generation,
        simulated=command["simulated"],
        command=command,
        mechanism=P.Mechanism(args.mechanism),
        max_restarts=args.max_restarts,
        stop_timeout=args.stop_timeout,
        backoff=args.backoff,
        standby=args.standby,
        scheduler_url=args.scheduler_url,
        job_id=args.job_id,
        heartbeat=args.heartbeat,
        final_linger=max(0.0, args.final_linger),
        echo=not args.quiet,
    )
    try:
        code = Sidecar(opts).run()
    except SystemExit as e:
        if isinstance(e.code, str):
            print(f"error: {e.code}", file=sys.stderr)
            return P.EXIT_USAGE
        raise
    status = job.read_status() or {}
    err = status.get("error")
    if code == P.EXIT_FAILED and err:
        print(f"\njob failed: {err.get('type')}: {err.get('message')}", file=sys.stderr)
        if err.get("traceback"):
            print(err["traceback"].rstrip(), file=sys.stderr)
        if err.get("hint"):
            print(f"hint: {err['hint']}", file=sys.stderr)
    return code


# -- control commands ---------------------------------------------------------------------------
def _existing_job(path: str) -> JobDir:
    job = JobDir(path)
    if not job.path.is_dir():
        raise ValueError(f"no such job dir: {path}")
    return job


def _nudge(job: JobDir) -> int | None:
    pid = job.sidecar_pid()
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
    return pid


def cmd_resize(args, parser) -> int:
    job = _existing_job(args.job_dir)
    current = job.read_grant()
    status = job.read_status() or {}
    gens = [g for g in (current and current.generation, status.get("generation")) if g is not None]
    grant = P.Grant(max(gens, default=0) + 1, args.gpus, P.GrantAction.RUN)
    job.write_grant(grant)
    pid = _nudge(job)
    where = f"sidecar {pid} nudged" if pid else "no sidecar running: applies at the next run"
    print(f"requested generation {grant.generation} on gpus {','.join(args.gpus)} ({where})")
    return 0


def cmd_stop(args, parser) -> int:
    job = _existing_job(args.job_dir)
    current = job.read_grant()
    if current is None:
        raise ValueError(f"{job.path} has no {P.GRANT}: is it a job dir?")
    action = P.GrantAction.CANCEL if args.cmd == "cancel" else P.GrantAction.STOP
    job.write_grant(P.Grant(current.generation, current.gpus, action))
    pid = _nudge(job)
    print(
        f"{args.cmd} requested" + (f" (sidecar {pid} nudged)" if pid else " (no sidecar running)")
    )
    if args.wait and pid:
        while job.sidecar_pid() == pid:
            time.sleep(0.1)
        print(f"state: {(job.read_status() or {}).get('state')}")
    return 0


def cmd_status(args, parser) -> int:
    job = _existing_job(args.job_dir)
    status = job.read_status()
    if status is None:
        print(f"{job.path}: no status yet")
        return 1
    if args.json:
        print(json.dumps(status, indent=1))
        return 0
    print(format_status(status, _last_progress(job)))
    return 0


def _last_progress(job: JobDir) -> dict | None:
    try:
        with open(job / P.PROGRESS, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        with contextlib.suppress(ValueError):
            return json.loads(line)
    return None


def format_status(st: dict, prog: dict | None) -> str:
    gpus = ",".join(st.get("gpus") or []) or "-"
    out = [
        f"state       {st.get('state')}   (updated {now_iso(st.get('updated_at'))})",
        f"grant       generation {st.get('generation')}, gpus {gpus} ({st.get('replicas')} replicas)",
        f"processes   sidecar {st.get('sidecar_pid')}, trainer {st.get('trainer_pid') or '-'}, "
        f"restarts {st.get('restarts')}",
    ]
    if prog:
        spe = prog.get("steps_per_epoch") or "?"
        loss = prog.get("loss")
        rate = prog.get("samples_per_s")
        out.append(
            f"progress    epoch {P.epoch_shown(prog.get('epoch'), prog.get('epochs'))}/"
            f"{prog.get('epochs')}, step "
            f"{prog.get('step_in_epoch')}/{spe}, global step {prog.get('global_step')}, "
            f"loss {'-' if loss is None else f'{loss:.4g}'}, "
            f"{'-' if rate is None else f'{rate:.1f}'} samples/s "
            f"(global batch {prog.get('batch_size')}, {prog.get('replicas')} replicas)"
        )
    for r in st.get("resizes") or []:
        pause = "-" if r.get("pause_s") is None else f"{r['pause_s']:.2f} s"
        out.append(
            f"resize      gen {r.get('generation')}: {','.join(r.get('from_gpus') or [])} -> "
            f"{','.join(r.get('to_gpus') or [])}, pause {pause}, lost steps "
            f"{r.get('lost_steps')} ({r.get('mechanism', 'sidecar')})"
        )
    if st.get("model_path"):
        out.append(f"model       {st['model_path']}")
    err = st.get("error")
    if err:
        out.append(f"error       {err.get('type')}: {err.get('message')}")
        if err.get("hint"):
            out.append(f"hint        {err['hint']}")
    if st.get("exit_code") is not None:
        out.append(f"exit code   {st['exit_code']}")
    return "\n".join(out)
