"""A real Jupyter server (simulated GPUs) whose kernels go through the provisioner, and real
kernels reached with jupyter_client."""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from jupyter_client.blocking import BlockingKernelClient
from servers import call, free_port, wait_for

from jupyter_elastic_gpu.kernels import PROVISIONER_NAME
from jupyter_elastic_gpu.kernels.specs import kernel_json, spec_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kernel_env(tmp_path):
    """Environment for a server and its kernels: our provisioner registered, kernel specs
    'Python 3 (1 GPU)' and '(2 GPUs)' installed in a data dir of their own."""
    data = tmp_path / "jupyter-data"
    for gpus in (1, 2):
        folder = data / "kernels" / spec_name(gpus)
        folder.mkdir(parents=True)
        spec = kernel_json(gpus, python=sys.executable, admission_timeout=20)
        (folder / "kernel.json").write_text(json.dumps(spec))
    group = entry_points(group="jupyter_client.kernel_provisioners")
    assert any(ep.name == PROVISIONER_NAME for ep in group), (
        "the provisioner's entry point is missing: install the package (pip install -e .)"
    )
    paths = [str(ROOT), str(ROOT / "sidecar")]
    env = {
        "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
        "JUPYTER_PATH": str(data),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    return env


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
