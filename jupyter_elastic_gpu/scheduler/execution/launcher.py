"""Launchers start a job's sidecar; the scheduler never touches trainers itself.

``BaseLauncher`` is the contract a lab can plug its own launcher into
(``c.ElasticGPUApp.launcher_class``). ``LocalLauncher`` starts ``python -m elastic_gpu_sidecar
run`` on this machine in a session of its own, so that the sidecar (and its trainer) outlives
a restart of JupyterLab or of the scheduler: the restarted scheduler re-adopts it from its
heartbeats. ``AgentLauncher`` starts nothing: the shared scheduler lists the launch for the
job owner's own Jupyter server (``scheduler/execution/agent.py``), so trainers run as their user. A
sidecar gets an allow-listed environment (``sidecar_env``: none of its starter's credentials);
the per-job secret goes in it, never on a command line other users can read.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from elastic_gpu_sidecar import protocol as P
from traitlets import Bool, Dict, List, Unicode
from traitlets.config import LoggingConfigurable

from ...models import LaunchRequest
from ..storage import jobdirs, ownfiles
from .inventory import parent_pid


class PlaceGone(RuntimeError):
    """The GPUs of a launch are not there any more (their node left the cluster): the job
    waits for GPUs again instead of failing."""


class BaseLauncher(LoggingConfigurable):
    """Starts sidecars for the service. Subclass it and set ``c.ElasticGPUApp.launcher_class``.

    ``starts_processes`` says whether this launcher starts sidecars itself, as the server's
    account (then the service writes a job's files into its directory, and asks ``alive``
    about it); False means another side does both (the job owner's server).
    ``spans_nodes`` says whether its GPUs lie on several machines (a notebook kernel's lease
    could then land on another machine than the kernel).
    """

    starts_processes = True
    spans_nodes = False

    async def launch(self, request: LaunchRequest) -> dict[str, Any]:
        """Start the sidecar; returns what the launcher wants remembered (e.g. its pid).
        Raises ``PlaceGone`` when the GPUs' node is gone, anything else when the job cannot
        be started as it is (it fails with that error)."""
        raise NotImplementedError

    def alive(self, record: dict[str, Any]) -> bool | None:
        """Whether the sidecar recorded by ``launch`` still runs (None: cannot tell)."""
        return None

    async def signal(self, record: dict[str, Any], signum: int = signal.SIGTERM) -> bool:
        """Send ``signum`` to the sidecar recorded by ``launch`` (and its trainer: SIGTERM asks
        for a checkpoint, then a stop); False when it is not running or not this side's."""
        return False

    async def end(self, record: dict[str, Any]) -> bool:
        """End every process of the launch recorded by ``launch`` at once (the sidecar, its
        trainer and what they started), whatever they are doing: its claim on GPUs was voided
        (``releases.py``). False when this side does not own them (nothing was done)."""
        return False


def sidecar_command(request: LaunchRequest, python: str, standby: bool = True) -> list[str]:
    """The sidecar's command line. A job of one size (``min_gpus`` = ``max_gpus``) gets no
    standby interpreter: no policy resizes it, and a suspension ends its sidecar, so the
    interpreter's memory and import would only ever be spent."""
    spec = request.spec
    cmd = [
        python,
        "-m",
        "elastic_gpu_sidecar",
        "run",
        "--job-dir",
        request.job_dir,
        "--gpus",
        ",".join(request.gpus),
        "--generation",
        str(request.generation),
        "--scheduler-url",
        request.heartbeat_url,
        "--job-id",
        request.job_id,
        "--heartbeat",
        f"{request.heartbeat_interval:g}",
        "--mechanism",
        request.mechanism.value,
        "--checkpoint-interval",
        f"{request.checkpoint_interval:g}",
        "--quiet",
    ]
    if request.simulated:
        cmd.append("--simulated")
    if not standby or spec.min_gpus == spec.max_gpus:
        cmd.append("--no-standby")
    if spec.kind == P.JobKind.SYNTHETIC:
        syn = spec.synthetic
        profile = ",".join(f"{g}:{x:g}" for g, x in sorted(syn.throughput.items()))
        cmd += [
            "--synthetic",
            "--profile",
            profile,
            "--work",
            str(int(syn.work)),
            "--time-scale",
            f"{syn.time_scale:g}",
            "--batch",
            str(syn.batch),
        ]
        if syn.save_s:
            cmd += ["--save-seconds", f"{syn.save_s:g}"]
        return cmd
    if spec.epochs:
        cmd += ["--epochs", str(spec.epochs)]
    cmd += ["--batch-policy", spec.batch_policy.value, "--framework", spec.framework.value]
    if spec.measure_noise:
        cmd.append("--measure-noise")
    return [*cmd, "--", os.path.join(request.job_dir, P.SCRIPT), *spec.args]


def open_job_dir(request: LaunchRequest) -> Any:
    """Create (or check: ours, not a link) the job dir, write the script into it without
    following links (jobdirs, ownfiles), and open the sidecar's output file for appending."""
    with jobdirs.job_dir_fd(request.job_dir) as dir_fd:
        if request.spec.kind == P.JobKind.SCRIPT:
            ownfiles.write_file(dir_fd, P.SCRIPT, (request.spec.script or "").encode())
        return os.fdopen(ownfiles.open_append(dir_fd, P.SIDECAR_OUT), "ab")


#: What a sidecar and its trainer get of the environment that starts them (names, or
#: shell-style patterns): what training needs to find its Python, its libraries and its
#: devices, and to tune them. Nothing else passes: a list of what to remove would miss the next
#: credential. A lab adds to it with ``pass_env``; the admin's ``environment`` passes whole.
PASS_ENV = (
    *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR"),
    *("PYTHON*", "VIRTUAL_ENV", "CONDA_*", "LD_LIBRARY_PATH", "XDG_CACHE_HOME", "MPLBACKEND"),
    *("CUDA_*", "NVIDIA_*", "NCCL_*", "TF_*", "XLA_*", "KERAS_*", "JAX_*", "TRITON_*"),
    *("OMP_*", "KMP_*", "MKL_*", "OPENBLAS_*", "HF_*", "TORCH_*", "PYTORCH_*"),
    *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"),
    P.ENV_PROGRESS_INTERVAL,
    P.ENV_LOGICAL_MEMORY_MB,
)
#: Proxies pass (a trainer downloads data sets and weights through them), but only without a
#: ``user:password@`` in their URL: those credentials are the lab's, and a trainer's log or a
#: library that reports its environment would carry them further.
PROXY_ENV = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy")
#: A name holding one of these words, or starting so, looks like a credential and never passes
#: from the server's environment, whatever pattern allows it: a trainer needs no access to any
#: API (the job's own secret is added for the sidecar, which keeps it from its trainer).
CREDENTIAL_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "COOKIE", "CREDENTIAL", "AUTH")
CREDENTIAL_PREFIXES = ("JPY_", "JUPYTERHUB_")


def passes(name: str, value: str, patterns: Iterable[str] = ()) -> bool:
    """Whether the variable ``name=value`` of the starter's environment reaches a sidecar:
    allowed by ``PASS_ENV``, a proxy or ``patterns``, and not a credential."""
    upper = name.upper()
    if upper.startswith(CREDENTIAL_PREFIXES) or any(w in upper for w in CREDENTIAL_WORDS):
        return False
    if name.lower() in PROXY_ENV:
        return "@" not in value
    return any(fnmatch.fnmatchcase(name, p) for p in (*PASS_ENV, *patterns))


def sidecar_env(
    base: Mapping[str, str],
    secret: str,
    environment: Mapping[str, str] | None = None,
    patterns: Iterable[str] = (),
) -> dict[str, str]:
    """The sidecar's environment: what ``base`` has that ``passes``, then the admin's
    ``environment`` as given, and the job's secret."""
    patterns = tuple(patterns)
    env = {k: v for k, v in base.items() if passes(k, v, patterns)}
    env.update(environment or {})
    env[P.ENV_SECRET] = secret
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's start-up notices drown the user's log
    return env


def spawn_sidecar(argv: list[str], env: dict[str, str], cwd: str, out: Any) -> subprocess.Popen:
    """Start a sidecar in a session of its own (no signal to its starter's group reaches it),
    its output appended to ``out``."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


class ProcessLauncher(BaseLauncher):
    """A launcher that starts sidecar processes itself, with these settings."""

    python = Unicode(
        config=True,
        help="Python that runs sidecars and trainers (it needs TensorFlow for script jobs; on "
        "a cluster, the same path on every node); default: the Python of this server.",
    )
    environment = Dict(
        Unicode(),
        config=True,
        help="Extra environment variables for sidecars and their trainers, passed as given "
        "(a credential a trainer needs goes here, not through pass_env).",
    )
    pass_env = List(
        Unicode(),
        config=True,
        help="More variables of the server's environment that sidecars and trainers get, as "
        "names or shell-style patterns (e.g. ['WANDB_MODE', 'MYLAB_*']), beside the built-in "
        "list (PASS_ENV in jupyter_elastic_gpu.scheduler.execution.launcher: paths, locale, Python, "
        "CUDA, TensorFlow, thread pools, proxies without credentials). A name that looks like "
        "a credential (TOKEN, SECRET, PASSWORD, KEY, COOKIE, AUTH ..., JPY_*, JUPYTERHUB_*) "
        "never passes: put what a trainer must have in `environment`.",
    )
    standby = Bool(
        True,
        config=True,
        help="Each sidecar of a job that can be resized (min_gpus < max_gpus) keeps a spare "
        "interpreter with its framework imported, which shortens a resize by the import "
        "(about 0.6 GB of memory per running job; turn off where memory is short).",
    )


class LocalLauncher(ProcessLauncher):
    """Start sidecars as child processes of this server, in their own session."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: The sidecars started here that have not ended yet.
        self._procs: dict[int, subprocess.Popen] = {}

    async def launch(self, request: LaunchRequest) -> dict[str, Any]:
        out = open_job_dir(request)
        env = sidecar_env(os.environ, request.secret, self.environment, self.pass_env)
        cwd = request.spec.cwd or request.job_dir
        if not os.path.isdir(cwd):
            cwd = request.job_dir
        try:
            proc = spawn_sidecar(
                sidecar_command(request, self.python or sys.executable, self.standby), env, cwd, out
            )
        finally:
            out.close()
        self._procs[proc.pid] = proc
        threading.Thread(target=self._reap, args=(proc,), name="reap-sidecar", daemon=True).start()
        self.log.info(
            "job %s: sidecar started (pid %s) on GPUs %s",
            request.job_id,
            proc.pid,
            ",".join(request.gpus),
        )
        return {"pid": proc.pid, "host": os.uname().nodename}

    def _reap(self, proc: subprocess.Popen) -> None:
        """Wait for a sidecar to end, then forget it: it would stay a defunct child of this
        server otherwise, since nothing asks ``alive`` about a job that is over (or about a
        shared scheduler's job once it is no longer listed)."""
        proc.wait()
        self._procs.pop(proc.pid, None)

    async def signal(self, record: dict[str, Any], signum: int = signal.SIGTERM) -> bool:
        if self.alive(record) is not True:
            return False
        try:
            os.killpg(record["pid"], signum)  # the sidecar leads its own session
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def end(self, record: dict[str, Any]) -> bool:
        alive = self.alive(record)
        if alive is not True:
            return alive is False  # already over: nothing left to end
        kill_tree(record["pid"])  # _reap waits for it: no defunct child is left
        return True

    def alive(self, record: dict[str, Any]) -> bool | None:
        pid = record.get("pid")
        if not isinstance(pid, int) or record.get("host") not in (None, os.uname().nodename):
            return None
        proc = self._procs.get(pid)
        if proc is not None:
            return proc.poll() is None  # _reap waits for it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return _not_zombie(pid)


class AgentLauncher(BaseLauncher):
    """The shared scheduler starts nothing: each user's own server does (scheduler/execution/agent.py),
    so trainers run as the user who submitted them."""

    starts_processes = False

    async def launch(self, request: LaunchRequest) -> dict[str, Any]:
        return {"via": "agent"}


def kill_tree(pid: int) -> set[int]:
    """SIGKILL ``pid``, every descendant of it, and the process groups of all of them (the
    sidecar and its trainer each lead a group of their own; a user's subprocesses join the
    trainer's); the groups killed. The tree is read before the first signal: a child
    orphaned by it is still in a group that is killed."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = parent_pid(int(entry))
            if parent:
                children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [pid]
    while todo and len(tree) < 100_000:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    groups = set()
    for p in tree:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(p))
    groups -= {os.getpgid(0)}  # never our own group
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for p in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
    return groups


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
