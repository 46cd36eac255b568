"""`jupyter-elastic-gpu submit | status | logs | cancel | suspend | resume | keep`: the
scheduler for people outside notebooks (terminals, shell scripts, cron).

The scheduler is found as notebooks find it (``notebook.discovery.discover``): environment, the
Jupyter server this terminal runs under, or the shared daemon. Output is made for scripts:
``submit`` prints the job id alone on stdout, ``cancel`` the new state, ``status --json`` the
``status`` document; human lines go to stderr. The exit status says what went wrong
(``errors.ExitCode``: 2 usage, 3 not found, 4 forbidden, 5 unreachable, 1 any other refusal).
Every error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic_gpu_sidecar.protocol import JobKind

from .errors import ExitCode, exit_codes_text
from .listing import add_filter_options, hidden_line, job_filter
from .log_follow import follow_logs
from .models import SubmitRequest
from .notebook.client import SchedulerClient, SchedulerError
from .notebook.discovery import discover
from .notebook.text import cancel_text, no_log_text
from .options import add_job_options, as_flags, job_request
from .status_table import format_status

_NAME_UNSAFE = re.compile(r"[^\w.\- ]+")


class HelpFormatter(argparse.HelpFormatter):
    """Descriptions wrapped as usual; an epilog of several lines (the exit statuses) as is."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_client_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``submit``, ``status``, ``logs``, ``cancel``, ``suspend``, ``resume`` and
    ``keep`` on the CLI's sub-parsers; each one's ``--help`` ends with the exit statuses."""
    add_parser = functools.partial(
        sub.add_parser, epilog=exit_codes_text(), formatter_class=HelpFormatter
    )
    p = add_parser(
        "submit",
        help="submit a training script (or a synthetic job) to the scheduler",
        description="Submit a training script (Keras, PyTorch Lightning, a Hugging Face Trainer "
        "or a torchrun script: --framework) as an elastic job: the scheduler "
        "gives it between --min-gpus and --max-gpus GPUs and changes the count while it trains. "
        "Prints the job id alone on stdout: ID=$(jupyter elastic-gpu submit train.py ...). The "
        "options are those of %%elastic_train.",
    )
    p.add_argument("script", nargs="?", help="the training script (not with --synthetic)")
    add_job_options(p)
    y = p.add_argument_group("synthetic jobs (no TensorFlow; for trying the scheduler)")
    y.add_argument("--synthetic", action="store_true", help="submit a synthetic job")
    y.add_argument("--work", type=float, metavar="W", help="samples to process in total")
    y.add_argument(
        "--throughput",
        metavar="G:X,...",
        help="samples/s at each GPU count, e.g. 1:100,2:190,4:360",
    )
    y.add_argument("--time-scale", type=float, metavar="F", help="run F times faster (default 1)")
    p.set_defaults(func=_guarded(run_submit))

    p = add_parser(
        "status",
        help="the GPUs and the jobs of the scheduler",
        description="Show who holds each GPU and the jobs (id, name, user, state, GPUs, "
        "min/max, epoch, reason): the open ones and those finished in the last 24 h unless "
        "--all or --since says otherwise. Other users' finished jobs are not listed; their "
        "open ones show owner, size and state only.",
    )
    p.add_argument("--json", action="store_true", help="print the status document as JSON")
    add_filter_options(p)
    p.set_defaults(func=_guarded(run_status))

    p = add_parser(
        "logs",
        help="print a job's trainer log (or its sidecar log)",
        description="Print the end of a job's trainer log; --follow keeps printing until the job "
        "ends.",
    )
    p.add_argument("id", help="job id")
    p.add_argument("--tail", type=int, default=200, metavar="N", help="last N lines (default 200)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")
    p.add_argument(
        "--sidecar", action="store_true", help="the sidecar's log (starts, resizes, crashes)"
    )
    p.set_defaults(func=_guarded(run_logs))

    for name, run, summary, description in JOB_CHANGES:
        p = add_parser(name, help=summary, description=description)
        p.add_argument("id", help="job id")
        if name == "keep":
            p.add_argument(
                "--off", action="store_true", help="no longer keep it: it expires as others do"
            )
        if name == "cancel":
            p.add_argument(
                "--force",
                action="store_true",
                help="end its processes at once instead of waiting for its checkpoint (the "
                "work since its last periodic checkpoint is lost)",
            )
        p.set_defaults(func=_guarded(run))


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn the errors a user meets into one stderr line and the documented exit status."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except SchedulerError as e:
            _error(args, e.message)
            return ExitCode.of_status(e.status, e.reason)
        except BrokenPipeError:  # `... | head` stopped reading: not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return ExitCode.OK
        except (ValueError, OSError) as e:
            _error(args, str(e))
            return ExitCode.USAGE

    return wrapper


def _error(args: argparse.Namespace, message: str) -> None:
    line = " ".join(message.split())
    if getattr(args, "command", "") == "submit":
        line = as_flags(line)  # the scheduler names the fields the options set
    print(f"jupyter-elastic-gpu {getattr(args, 'command', '')}: error: {line}", file=sys.stderr)


def _client() -> SchedulerClient:
    return discover().client()


# -- submit -------------------------------------------------------------------------------------


def parse_throughput(text: str) -> dict[str, float]:
    """``"1:100,2:190"`` -> ``{"1": 100.0, "2": 190.0}`` (the API's synthetic.throughput)."""
    points: dict[str, float] = {}
    for part in text.split(","):
        gpus, sep, speed = part.strip().partition(":")
        try:
            g, x = int(gpus), float(speed)
        except ValueError:
            g, x = 0, math.nan
        if not sep or g < 1 or not x > 0 or math.isinf(x):
            raise ValueError(
                "--throughput: expected GPUS:SAMPLES_PER_S pairs with GPUS >= 1 and a speed "
                f"above 0, such as 1:100,2:190,4:360; got {part.strip()!r}"
            )
        if str(g) in points:
            raise ValueError(f"--throughput: {g} GPUs is given twice")
        points[str(g)] = x
    return points


def build_request(args: argparse.Namespace) -> SubmitRequest:
    """The submit request for the arguments, or ValueError naming the first bad one."""
    if args.synthetic:
        fields = _synthetic_part(args)
    else:
        fields = _script_part(args)
    if args.name is not None:
        fields["name"] = args.name.strip()
    return job_request(args, **fields)


def _synthetic_part(args: argparse.Namespace) -> dict[str, Any]:
    if args.script is not None:
        raise ValueError(f"--synthetic runs no script: drop {args.script!r} or drop --synthetic")
    for flag, value in (
        ("--epochs", args.epochs),
        ("--batch-policy", args.batch_policy),
        ("--measure-noise", args.measure_noise),
        ("--framework", args.framework),
        ("--simulated", args.simulated),
    ):
        if value is not None:
            raise ValueError(f"{flag} is for script jobs, not --synthetic ones")
    if args.work is None or args.throughput is None:
        raise ValueError("--synthetic needs --work W and --throughput G:X,... (e.g. 1:100,2:190)")
    synthetic: dict[str, Any] = {"work": args.work, "throughput": parse_throughput(args.throughput)}
    if args.time_scale is not None:
        synthetic["time_scale"] = args.time_scale
    return {"kind": JobKind.SYNTHETIC, "synthetic": synthetic}


def _script_part(args: argparse.Namespace) -> dict[str, Any]:
    for flag, value in (
        ("--work", args.work),
        ("--throughput", args.throughput),
        ("--time-scale", args.time_scale),
    ):
        if value is not None:
            raise ValueError(f"{flag} is for --synthetic jobs")
    if args.script is None:
        raise ValueError("give the training script to run (or --synthetic)")
    path = Path(args.script).expanduser()
    if path.is_dir():
        raise ValueError(f"{args.script}: is a directory: give the training script in it")
    if not path.is_file():
        raise ValueError(f"{args.script}: no such file")
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{args.script}: not a UTF-8 text file") from None
    if not source.strip():
        raise ValueError(f"{args.script}: the script is empty")
    check_compiles(source, args.script)
    return {
        "kind": JobKind.SCRIPT,
        "script": source,
        "cwd": str(path.resolve().parent),
        "name": _NAME_UNSAFE.sub("-", path.stem)[:80] or "script",
    }


def check_compiles(source: str, name: str) -> None:
    """Refuse a script Python cannot compile, with FILE:LINE, before anything is submitted
    (it would otherwise wait for GPUs, start TensorFlow, then fail)."""
    try:
        compile(source, name, "exec", dont_inherit=True)
    except SyntaxError as e:  # IndentationError and TabError too
        where = f"{name}:{e.lineno}" if e.lineno else name
        line = f": {e.text.strip()}" if e.text and e.text.strip() else ""
        raise ValueError(
            f"{where}: {type(e).__name__}: {e.msg}{line} (nothing was submitted)"
        ) from None
    except ValueError as e:  # null bytes, on Pythons that do not call them a SyntaxError
        raise ValueError(f"{name}: {e} (nothing was submitted)") from None


def run_submit(args: argparse.Namespace) -> int:
    request = build_request(args)
    job = _client().submit(request.model_dump(mode="json", exclude_none=True))
    print(job["id"])
    print(describe_submitted(job), file=sys.stderr)
    return ExitCode.OK


def describe_submitted(job: dict[str, Any]) -> str:
    """The human line that goes with the id (the reason already names the state)."""
    name = f" ({job['name']})" if job.get("name") else ""
    where = job.get("reason") or job.get("state") or "queued"
    notes = "".join(f" ({as_flags(note)})" for note in job.get("notes") or [])
    return (
        f"submitted {job['id']}{name}: {where}{notes}; follow it with "
        f"`jupyter elastic-gpu logs --follow {job['id']}`"
    )


# -- status -------------------------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    query = job_filter(args, time.time())
    doc = _client().status(query.as_query())
    if args.json:
        print(json.dumps(doc, indent=2))
        return ExitCode.OK
    print(format_status(doc))
    note = hidden_line(doc.get("hidden") or 0, args)
    if note:
        print(note, file=sys.stderr)
    return ExitCode.OK


# -- logs ---------------------------------------------------------------------------------------


def run_logs(args: argparse.Namespace) -> int:
    if args.tail < 1:
        raise ValueError(f"--tail must be at least 1, got {args.tail}")
    key = "sidecar" if args.sidecar else "trainer"
    client = _client()
    if not args.follow:
        text = client.logs(args.id, tail=args.tail).get(key) or ""
        sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
        if not text:
            print(f"{args.id}: {no_log_text(client.job(args.id))}", file=sys.stderr)
        return ExitCode.OK
    job = follow_logs(client, args.id, key, args.tail)
    error = job.get("error")
    why = f": {error.get('message') or error}" if isinstance(error, dict) else ""
    print(f"job {args.id} ended {job.get('state')}{why}", file=sys.stderr)
    return ExitCode.OK


# -- cancel -------------------------------------------------------------------------------------


def run_cancel(args: argparse.Namespace) -> int:
    job = _client().cancel(args.id, force=args.force)
    print(job.get("state"))
    print(cancel_text(job), file=sys.stderr)
    return ExitCode.OK


# -- suspend and resume -------------------------------------------------------------------------


def _changed(how: Callable[[SchedulerClient, str], dict]) -> Callable[[argparse.Namespace], int]:
    """A command that changes a job: prints its new state, and its reason on stderr."""

    def run(args: argparse.Namespace) -> int:
        job = how(_client(), args.id)
        print(job.get("state"))
        print(f"{args.id}: {job.get('reason')}", file=sys.stderr)
        return ExitCode.OK

    return run


def run_keep(args: argparse.Namespace) -> int:
    job = _client().keep(args.id, not args.off)
    print("kept" if job.get("kept") else "not kept")
    how = (
        "it is never removed"
        if job.get("kept")
        else "it is removed with its files once the retention after its end has passed"
    )
    print(f"{args.id}: {how}", file=sys.stderr)
    return ExitCode.OK


#: (command, what it runs, help, description) of the commands that change one job.
JOB_CHANGES = (
    (
        "cancel",
        run_cancel,
        "cancel a job (it checkpoints and stops)",
        "Cancel a job: it saves a checkpoint at its next step and stops. Prints the job's new "
        "state.",
    ),
    (
        "suspend",
        _changed(SchedulerClient.suspend),
        "suspend a job (it checkpoints, stops, and waits until resumed)",
        "Suspend a job: it saves a checkpoint at its next step, stops, and is held (its GPUs go "
        "to other jobs) until `resume`. Prints the job's new state.",
    ),
    (
        "resume",
        _changed(SchedulerClient.resume),
        "resume a suspended job (from its checkpoint)",
        "Resume a suspended job: it waits in the queue again and goes on from its checkpoint "
        "when it gets GPUs. Prints the job's new state.",
    ),
    (
        "keep",
        run_keep,
        "keep a job past the retention (or, with --off, no longer)",
        "Keep a job: once finished it is never removed. Finished jobs are otherwise removed, "
        "their files (logs, checkpoints, the saved model) with them, when the scheduler's "
        "retention has passed (30 days unless the admin set another). Prints kept or not kept.",
    ),
)
