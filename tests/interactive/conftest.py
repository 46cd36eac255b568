"""A real Jupyter server (simulated GPUs) whose kernels go through the provisioner, and real
kernels reached with jupyter_client."""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyter_client.blocking import BlockingKernelClient
from servers import call, free_port, leased_kernel_env, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kernel_env(tmp_path):
    """Kernel specs "Python 3 (N GPUs)" for N in (1, 2), as ``leased_kernel_env`` writes them."""
    return leased_kernel_env(tmp_path / "jupyter-data", (1, 2))


class Lab:
    """A running server and the kernels it started."""

    def __init__(self, proc) -> None:
        self.proc = proc
        self.base = proc.url
        self.token = proc.token

    def api(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        return call(method, self.base + path, self.token, body)

    def start_kernel(self, name: str = "python3") -> str:
        status, doc = self.api("POST", "api/kernels", {"name": name})
        assert status == 201, doc
        return doc["id"]

    def shutdown_kernel(self, kernel_id: str) -> None:
        status, _ = self.api("DELETE", f"api/kernels/{kernel_id}")
        assert status == 204

    def client(self, kernel_id: str) -> BlockingKernelClient:
        runtime = self.proc.root / f"{self.proc.name}-runtime"
        kc = BlockingKernelClient(connection_file=str(runtime / f"kernel-{kernel_id}.json"))
        kc.load_connection_file()
        kc.start_channels(hb=False)  # a late heartbeat on a loaded machine is not a death
        kc.wait_for_ready(timeout=60)
        return kc

    def run(self, kernel_id: str, code: str, timeout: float = 120) -> str:
        """What ``code`` prints in the kernel (an error fails the test)."""
        kc = self.client(kernel_id)
        out: list[str] = []

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        try:
            reply = kc.execute_interactive(code, timeout=timeout, output_hook=hook)
        finally:
            kc.stop_channels()
        assert reply["content"]["status"] == "ok", "".join(out)
        return "".join(out)

    def env(self, kernel_id: str, name: str, timeout: float = 120) -> str | None:
        out = self.run(kernel_id, f"import os; print(repr(os.environ.get({name!r})))", timeout)
        return eval(out.strip())  # a repr of a str or None, printed by our own code

    def env_after_restart(self, kernel_id: str, name: str) -> str | bool | None:
        """``env`` for polling across a restart: False while the kernel is being replaced
        (the old one died mid-request, or the new one does not answer yet)."""
        try:
            return self.env(kernel_id, name, timeout=20)
        except (AssertionError, RuntimeError, SyntaxError, TimeoutError):
            return False

    def jobs(self) -> list[dict]:
        status, doc = self.api("GET", "elastic-gpu/api/jobs")
        assert status == 200, doc
        return doc["jobs"]

    def leases(self) -> list[dict]:
        return [j for j in self.jobs() if j.get("kind") == "interactive"]

    def until(self, predicate, timeout: float = 60, what: str = "condition"):
        return wait_for(predicate, timeout, what=what)


@pytest.fixture
def lab(server_process, kernel_env):
    """Start a server (``lab(config={...})``) whose kernels see no GPU unless leased."""

    def start(config: dict | None = None, name: str = "server") -> Lab:
        proc = server_process(port=free_port(), env=kernel_env, config=config, name=name)
        return Lab(proc)

    return start
