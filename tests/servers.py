"""Real `jupyter server` and scheduler-daemon processes for tests that need a process to kill."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from jupyter_elastic_gpu.scheduler.execution.launcher import BaseLauncher

#: Ports for the servers tests start, and for addresses where nothing may listen: a block of its
#: own per pytest-xdist worker, below the kernel's ephemeral range (which anything that binds
#: port 0 draws from). Taking a port by binding 0 and closing it let another worker's server,
#: bound to port 0 meanwhile, get the same one before the test's server started: a CI run's
#: client then talked to another test's server. Each test session on the machine has a slot of
#: its own (``claim_port_slot``), so a run beside another (a test run while the full suite
#: runs) does not walk the same ports either.
PORT_BASE, PORT_BLOCK, PORT_BLOCKS, PORT_SLOTS = 20000, 500, 8, 3
#: The environment variable that hands the session's slot to its pytest-xdist workers.
ENV_PORT_SLOT = "ELASTIC_GPU_TEST_PORT_SLOT"
_ports = itertools.count()
_slot_lock: object = None  # the open lock file of the slot this session holds


def claim_port_slot() -> int:
    """Take the first port slot no other test session on this machine holds (a lock held for
    the session's life: the kernel lets it go when the process ends, however it ends), and
    hand it to the workers through ``ENV_PORT_SLOT``; slot 0 when all are taken."""
    global _slot_lock
    import fcntl
    import tempfile

    for slot in range(PORT_SLOTS):
        path = os.path.join(tempfile.gettempdir(), f"jupyter-elastic-gpu-test-ports-{slot}.lock")
        try:
            f = open(path, "a")  # noqa: SIM115 (held open until the session ends)
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another session (or another user's file)
            continue
        _slot_lock = f
        break
    else:
        slot = 0
    os.environ[ENV_PORT_SLOT] = str(slot)
    return slot


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A port nothing listens on now, that no other worker's test and no port-0 bind takes
    (one after another within the worker's block, so a port just given back rests a while)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slot = os.environ.get(ENV_PORT_SLOT, "0")
    block = int(worker) % PORT_BLOCKS if worker.isdigit() else 0
    if slot.isdigit():
        block += int(slot) % PORT_SLOTS * PORT_BLOCKS
    start = PORT_BASE + block * PORT_BLOCK
    if start + PORT_BLOCK > _ephemeral_low():  # a machine whose ephemeral range is wider
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for _ in range(PORT_BLOCK):
        port = start + next(_ports) % PORT_BLOCK
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # in use, or not free again yet
                continue
            return port
    raise RuntimeError(f"no free port in {start}-{start + PORT_BLOCK - 1}")


def get_json(url: str, token: str | None = None, timeout: float = 10.0) -> dict:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return json.loads(r.read())


def call(method: str, url: str, token: str | None, body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON) of one request, errors included."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if token:
        request.add_header("Authorization", f"token {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=15) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"message": raw.decode(errors="replace")}


def run_cli(url: str, token: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``jupyter-elastic-gpu ARGV`` as a user runs it against the scheduler at ``url`` with
    ``token`` (no other ELASTIC_GPU_* setting of this process leaks in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ELASTIC_GPU_")}
    env.update(ELASTIC_GPU_URL=url, ELASTIC_GPU_TOKEN=token)
    return subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def leased_kernel_env(
    data: Path, gpu_counts: tuple[int, ...] = (1, 2), migs: tuple[str, ...] = ("1g.10gb",)
) -> dict[str, str]:
    """Environment for a server whose kernels go through the provisioner: kernel specs
    "Python 3 (N GPUs)" for each N, and "Python 3 (P MIG slice)" for each MIG profile P of
    ``migs``, in a data folder ``data`` of their own (ahead of the
    JUPYTER_PATH already set, where the lab extension may be), and this checkout on the
    kernels' import path. The provisioner is found through the installed package's entry
    point."""
    from importlib.metadata import entry_points

    from jupyter_elastic_gpu.kernels import PROVISIONER_NAME
    from jupyter_elastic_gpu.kernels.specs import kernel_json, spec_name

    group = entry_points(group="jupyter_client.kernel_provisioners")
    assert any(ep.name == PROVISIONER_NAME for ep in group), (
        "the provisioner's entry point is missing: install the package (pip install -e .)"
    )
    for gpus in gpu_counts:
        folder = data / "kernels" / spec_name(gpus)
        folder.mkdir(parents=True)
        spec = kernel_json(gpus, python=sys.executable, admission_timeout=20)
        (folder / "kernel.json").write_text(json.dumps(spec))
    for mig in migs:
        folder = data / "kernels" / spec_name(1, mig)
        folder.mkdir(parents=True)
        spec = kernel_json(1, python=sys.executable, admission_timeout=20, mig=mig)
        (folder / "kernel.json").write_text(json.dumps(spec))
    repo = Path(__file__).resolve().parents[1]
    paths = [str(data), os.environ.get("JUPYTER_PATH", "")]
    imports = [str(repo), str(repo / "sidecar"), os.environ.get("PYTHONPATH", "")]
    return {
        "JUPYTER_PATH": os.pathsep.join(p for p in paths if p),
        "PYTHONPATH": os.pathsep.join(p for p in imports if p),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }


def wait_for(predicate, timeout: float, interval: float = 0.3, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


#: Scheduler settings that make tests run in seconds.
FAST_SERVICE = {
    "SchedulerService.tick_interval": 2.0,
    "SchedulerService.heartbeat_interval": 0.5,
    "SchedulerService.heartbeat_timeout": 6.0,
    "SchedulerService.default_resize_cost": 1.0,
    "SchedulerService.checkpoint_interval": 2.0,
}


def as_user(user: str | None, env: dict) -> dict:
    """Popen arguments that run a command as the OS account ``user`` (None: as this process),
    with that account's groups only and its home in ``env`` (needs root)."""
    if user is None:
        return {"env": env}
    pw = pwd.getpwnam(user)
    env = {**env, "HOME": pw.pw_dir, "USER": user, "LOGNAME": user}
    return {"env": env, "user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


class _Process:
    """A service started in its own session, its output in ``log_path``; ``user``: the OS
    account it runs as (the tests that start one run as root)."""

    proc: subprocess.Popen | None = None
    log_path: Path
    user: str | None = None

    def _spawn(self, args: list[str], env: dict) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **as_user(self.user, env),
            )

    def _wait(self, answers, timeout: float, what: str) -> None:
        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{what} exited: {self.log_path.read_text()[-3000:]}")
            return answers()

        wait_for(ready, timeout, what=f"{what} to answer")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class JupyterServerProcess(_Process):
    """`jupyter server` with the extension, its data (database, jobs) under ``root``."""

    def __init__(
        self,
        root: Path,
        port: int,
        token: str = "test-token",
        name: str = "server",
        config: dict | None = None,
        env: dict | None = None,
        extra_args: list[str] | None = None,
        fast: bool = True,
        user: str | None = None,
        python: str | None = None,
    ) -> None:
        self.root, self.port, self.token, self.name = Path(root), port, token, name
        self.user, self.python = user, python or sys.executable
        # "name" is c.ElasticGPUApp.name; "Class.name" any other class's setting. ``fast``:
        # short intervals, for tests that are not about what a user's defaults do.
        self.config = {
            "simulated_gpus": 4,
            "db_path": str(self.root / f"{name}-data" / "scheduler.sqlite"),
            **(FAST_SERVICE if fast else {}),
            "SchedulerService.job_root": str(self.root / f"{name}-data" / "jobs"),
            **(config or {}),
        }
        self.env = env or {}
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / f"{name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def api_url(self) -> str:
        return f"{self.url}elastic-gpu/api/"

    def start(self, timeout: float = 60.0, scheduler: bool = True) -> None:
        """Start and wait until the scheduler answers (``scheduler=False``: until the Jupyter
        server does, for a scheduler that is expected not to start)."""
        args = [
            self.python,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--allow-root",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            *self.extra_args,
        ]
        for key, value in self.config.items():
            name = key if "." in key else f"ElasticGPUApp.{key}"
            args.append(f"--{name}={json.dumps(value) if not isinstance(value, str) else value}")
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(self.root / f"{self.name}-runtime"),
            **self.env,
        }
        self._spawn(args, env)

        route = self.api_url + "whoami" if scheduler else self.url + "api/status"

        def answers():
            try:
                return get_json(route, self.token, timeout=2)
            except (OSError, ValueError):
                return None

        self._wait(answers, timeout, self.name)

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, like a crash."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class DaemonProcess(_Process):
    """`jupyter-elastic-gpu scheduler`, with its state (database, tokens) under ``root``."""

    def __init__(
        self,
        root: Path,
        port: int,
        extra: list[str] | None = None,
        user: str | None = None,
        python: str | None = None,
        env: dict | None = None,
    ) -> None:
        self.root, self.port, self.extra = Path(root), port, extra or []
        self.user, self.python, self.env = user, python or sys.executable, env or {}
        self.state = self.root / "daemon-state"
        self.discovery_dir = self.root / "daemon-discovery"
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "daemon.log"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/elastic-gpu/api/"

    def add_user(self, user: str, admin: bool = False) -> str:
        """A new token for ``user`` (add-user prints the lines of a token file: url=, token=)."""
        return self.token_file_text(user, admin).split("token=", 1)[-1].strip()

    def token_file_text(self, user: str, admin: bool = False) -> str:
        args = [
            self.python,
            "-m",
            "jupyter_elastic_gpu.cli",
            "scheduler",
            "add-user",
            user,
            "--state-dir",
            str(self.state),
        ] + (["--admin"] if admin else [])
        return subprocess.run(
            args, capture_output=True, text=True, check=True, **as_user(self.user, dict(os.environ))
        ).stdout

    def start(self, timeout: float = 30.0) -> None:
        args = [
            self.python,
            "-m",
            "jupyter_elastic_gpu.cli",
            "scheduler",
            "--port",
            str(self.port),
            "--state-dir",
            str(self.state),
            *([] if "--simulated-gpus" in self.extra else ["--simulated-gpus", "4"]),
            "--tick",
            "2",
            "--heartbeat-timeout",
            "6",
            *self.extra,
        ]
        if self.user is None and "--job-root" not in self.extra:
            # Under ``root``, not the daemon's default (the test users have no home, so their
            # jobs would go to the temp dir): the sidecars its users' servers start are then
            # ended with the test (``kill_sidecars_under``), and their folders with its tmp_path.
            args += ["--job-root", str(self.root / "jobs" / "{user}")]
        env = {**os.environ, "ELASTIC_GPU_DAEMON_DIR": str(self.discovery_dir), **self.env}
        self._spawn(args, env)

        def answers():
            try:
                urllib.request.urlopen(self.api_url + "whoami", timeout=2)
            except urllib.error.HTTPError as e:
                return e.code == 401  # up, and asking for a token
            except OSError:
                return False
            return True

        self._wait(answers, timeout, "the scheduler daemon")


def kill_sidecars_under(root: Path) -> list[int]:
    """SIGKILL every sidecar whose job dir lies under ``root`` (its trainer follows it).

    Sidecars outlive the server that started them on purpose (a restart re-adopts them), so a
    test that starts servers must end their sidecars itself."""
    killed = []
    marker = str(root)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = [a.decode(errors="replace") for a in argv]
        if "elastic_gpu_sidecar" in text and any(a.startswith(marker) for a in text):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


def sidecar_of(job_id: str) -> tuple[int, dict[str, str], list[str]]:
    """(pid, environment, argv) of ``job_id``'s running sidecar, read from /proc as any
    process of the same user can."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = [a.decode() for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            if "elastic_gpu_sidecar" not in argv or job_id not in argv:
                continue
            raw = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        env = dict(item.decode(errors="replace").partition("=")[::2] for item in raw if item)
        return int(entry.name), env, argv
    raise LookupError(f"no sidecar of {job_id}")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_bytes()
                ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo.extend(children.get(out[-1], ()))
    return out


def is_running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] != b"Z"


def freeze_sidecar(job_id: str) -> tuple[int, list[int], dict[str, str], list[str]]:
    """Freeze ``job_id``'s sidecar and trainer (SIGSTOP): they answer nothing any more."""
    pid, env, argv = wait_for(
        lambda: _found(sidecar_of, job_id), 30, what=f"the sidecar of {job_id}"
    )

    def with_trainer():
        found = process_tree(pid)
        return found if len(found) > 1 else None

    frozen = wait_for(with_trainer, 30, what="its trainer")
    for p in frozen:
        os.kill(p, signal.SIGSTOP)
    return pid, frozen, env, argv


def _found(fn, *args):
    try:
        return fn(*args)
    except LookupError:
        return None


class HolderBeats:
    """Heartbeats as a job's holder (a sidecar or a kernel's provisioner) every 0.3 s until
    stopped, with ``body()``; keeps every answer's status in ``statuses`` and hands each answer
    to ``answered``. Subclasses say what the holder claims."""

    def __init__(self, url: str, secret: str) -> None:
        self.url, self.secret = url, secret
        self.statuses: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def body(self) -> dict:
        raise NotImplementedError

    def answered(self, answer: dict) -> None:
        """What the holder does with an accepted heartbeat's answer (nothing: ignores it)."""

    def beat(self) -> None:
        request = urllib.request.Request(
            self.url, data=json.dumps(self.body()).encode(), method="POST"
        )
        request.add_header("Authorization", f"Bearer {self.secret}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                answer = json.loads(r.read())
                self.statuses.append(r.status)
        except urllib.error.HTTPError as e:
            self.statuses.append(e.code)
            return
        self.answered(answer)

    def _run(self) -> None:
        while not self.stop.wait(0.3):
            with contextlib.suppress(OSError):
                self.beat()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


class HeartbeatRecorder:
    """A transparent HTTP proxy between real sidecars and the server: it forwards each
    heartbeat unchanged and keeps (request body, status, answer) of each. While the server is
    down it answers 502 (as a sidecar would see it: no answer from the scheduler). Start the
    sidecars through ``sidecar_python(recorder, folder)`` to route their heartbeats here."""

    def __init__(self) -> None:
        self.target = ""  # the server's origin, set once it runs
        self.seen: list[tuple[dict, int, dict]] = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                url = urlunsplit(urlsplit(recorder.target)._replace(path=self.path.split("?")[0]))
                request = urllib.request.Request(url, data=body, method="POST")
                for name in ("Authorization", "Content-Type"):
                    if self.headers.get(name):
                        request.add_header(name, self.headers[name])
                try:
                    with urllib.request.urlopen(request, timeout=10) as r:
                        status, answer = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, answer = e.code, e.read()
                except OSError as e:  # the server is down (or was killed while answering)
                    status, answer = 502, json.dumps({"message": str(e)}).encode()
                with recorder.lock:
                    recorder.seen.append((_json(body), status, _json(answer)))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def acknowledged(self) -> dict[str, list[dict]]:
        """{job id: every progress record a heartbeat answered 200 carried}."""
        out: dict[str, list[dict]] = {}
        with self.lock:
            seen = list(self.seen)
        for body, status, _ in seen:
            if status == 200 and isinstance(body, dict):
                records = [*(body.get("backlog") or []), body.get("progress")]
                out.setdefault(body.get("job_id"), []).extend(r for r in records if r)
        return out

    def __enter__(self) -> HeartbeatRecorder:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def _json(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return {"raw": raw.decode(errors="replace")}


def sidecar_python(recorder: HeartbeatRecorder, folder: Path) -> str:
    """A Python for ``LocalLauncher.python`` that starts the real sidecar with its heartbeats
    pointed at ``recorder`` (the rest of its command line unchanged)."""
    wrapper = Path(folder) / "sidecar-python"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "from urllib.parse import urlsplit, urlunsplit\n"
        "args = sys.argv[1:]\n"
        "i = args.index('--scheduler-url') + 1\n"
        f"args[i] = urlunsplit(urlsplit(args[i])._replace(netloc='127.0.0.1:{recorder.port}'))\n"
        "os.execv(sys.executable, [sys.executable, *args])\n"
    )
    wrapper.chmod(0o755)
    return str(wrapper)


class RecordingLauncher(BaseLauncher):
    """A launcher that starts nothing and records each launch: the job ids in order, and each
    launch's secret, so that a test can heartbeat as the sidecar would. For tests of the
    service itself (which grant is published when, what it says), not of processes."""

    def __init__(self) -> None:
        super().__init__()
        self.launched: list[str] = []
        self.secrets: dict[str, str] = {}

    async def launch(self, request):
        self.launched.append(request.job_id)
        self.secrets[request.job_id] = request.secret
        return {}


def synthetic(min_gpus: int, max_gpus: int, work: float = 1e9) -> dict:
    """A synthetic job's submit body: ``min_gpus``-``max_gpus`` GPUs, on a speed curve to 4."""
    return {
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190, "3": 270, "4": 350}},
    }


@contextlib.asynccontextmanager
async def recording_service(tmp_path: Path, path: str = ":memory:", **settings):
    """(service, launcher): a ``SchedulerService`` on 4 simulated GPUs and the database
    ``path``, whose launches a ``RecordingLauncher`` records; ``settings`` are its traits."""
    from jupyter_elastic_gpu.scheduler.execution.inventory import SimulatedInventory
    from jupyter_elastic_gpu.scheduler.service import SchedulerService
    from jupyter_elastic_gpu.scheduler.storage.store import Store

    store = await Store.open(path)
    launcher = RecordingLauncher()
    svc = SchedulerService(
        store, SimulatedInventory(4), launcher, lambda j: "", job_root=str(tmp_path), **settings
    )
    try:
        yield svc, launcher
    finally:
        await store.close()


class PageServer(ThreadingHTTPServer):
    """A server at 127.0.0.1 (started at once) whose every GET answers ``status`` with
    ``page``; it counts the requests, and holds each until ``release`` is set while ``hold``
    is (an exporter that never answers)."""

    def __init__(self, page: str, path: str = "/metrics") -> None:
        self.page, self.status = page, 200
        self.hold, self.release = False, threading.Event()
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                if server.hold:
                    server.release.wait(30)
                body = server.page.encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}{path}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()
