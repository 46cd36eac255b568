"""A real `jupyter server` with the extension, as a subprocess, for the live benchmarks.

A small equivalent of tests/servers.py, kept here so that benchmarks do not import the test
suite. The server gets its own data dir (database, job dirs, runtime files), so that runs never
see each other's state, and is stopped with SIGTERM: the extension then closes its database
cleanly, which is what the benchmarks read afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def finish(server: JupyterServer, sleepers: list[int], root: Path, keep: bool) -> None:
    """Stop the server and the stand-in sidecars a run started (their ``sleep``), then remove
    the run's folder unless ``keep`` (``--keep``)."""
    server.stop()
    for pid in sleepers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    if keep:
        print(f"\nkept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """`python -m jupyter_server` with the extension; each config item ``key`` is
    ``c.ElasticGPUApp.key``, ``Class.key`` any other class's setting."""

    def __init__(
        self,
        root: Path,
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        token: str = "benchmark-token",
        port: int | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.token = token
        self.config = {
            "db_path": str(self.root / "scheduler.sqlite"),
            "SchedulerService.job_root": str(self.root / "jobs"),
            **(config or {}),
        }
        self.env = env or {}
        self.log_path = self.root / "server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def db_path(self) -> Path:
        return Path(self.config["db_path"])

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/elastic-gpu/api/"

    def argv(self) -> list[str]:
        args = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.jpserver_extensions=jupyter_elastic_gpu=True",
        ]
        for key, value in self.config.items():
            text = value if isinstance(value, str) else json.dumps(value)
            name = key if "." in key else f"ElasticGPUApp.{key}"
            args.append(f"--{name}={text}")
        return args

    def start(self, timeout: float = 90.0) -> None:
        env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(self.root / "runtime"), **self.env}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited:\n{self.log_tail()}")
            try:
                self.call("GET", "whoami", timeout=2)
                return
            except (OSError, ValueError):
                time.sleep(0.3)
        raise RuntimeError(f"the server did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait; SIGKILL only if it does not stop. Returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def call(
        self, method: str, path: str, body: Any = None, timeout: float = 30.0
    ) -> tuple[int, Any]:
        """(status, JSON) of one request to the API; HTTP errors are returned, not raised."""
        data = json.dumps(body).encode() if body is not None else None
        if method == "POST" and data is None:
            data = b"{}"
        request = urllib.request.Request(self.api_url + path, data=data, method=method)
        request.add_header("Authorization", f"token {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"message": raw.decode(errors="replace")}

    def get(self, path: str, timeout: float = 30.0) -> Any:
        code, payload = self.call("GET", path, timeout=timeout)
        if code != 200:
            raise RuntimeError(f"GET {path} answered {code}: {payload}")
        return payload
