"""A real JupyterHub for the hub tests (tests/hub, and the login in tests/browser): the
``hub`` fixture (registered in tests/conftest.py) starts one per test session with
`jupyter elastic-gpu hub-demo` (configurable-http-proxy, users' servers as local processes,
the elastic-gpu service on simulated GPUs), plus a test-only service whose token drives the
Hub's API as an admin.

configurable-http-proxy comes from npm: on PATH, or where .ci/install-test-deps puts it
(.ci/node/node_modules/.bin). Without it (or without jupyterhub) the tests are skipped, and
fail under CI.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from needs import missing
from servers import FAST_SERVICE, call, free_port, kill_sidecars_under, wait_for

from jupyter_elastic_gpu.hub import scopes

ROOT = Path(__file__).resolve().parents[1]
#: Where .ci/install-test-deps installs configurable-http-proxy when it is not on PATH.
LOCAL_PROXY_BIN = ROOT / ".ci" / "node" / "node_modules" / ".bin"
PASSWORD = "elastic-demo-pw"
SERVICE = f"services/{scopes.SERVICE_NAME}/"
#: The service's API and admin page under the Hub's URL.
SERVICE_API = f"{SERVICE}elastic-gpu/api/"


def _missing(what: str) -> None:
    missing(what, ".ci/install-test-deps and the test extras install it")


def proxy_path() -> str:
    """PATH with configurable-http-proxy on it (skips the tests where it is nowhere)."""
    path = os.environ.get("PATH", "")
    if shutil.which("configurable-http-proxy", path=path):
        return path
    if (LOCAL_PROXY_BIN / "configurable-http-proxy").exists():
        return f"{LOCAL_PROXY_BIN}{os.pathsep}{path}"
    _missing("configurable-http-proxy is not installed (npm install -g configurable-http-proxy)")
    return path


class Hub:
    """The running Hub: its URL, an admin token for its API, and helpers."""

    def __init__(self, url: str, admin_token: str, state: Path, proc: subprocess.Popen) -> None:
        self.url, self.admin_token, self.state, self.proc = url, admin_token, state, proc
        self.log_path = state.parent / "hub-demo.log"

    def api(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        return call(method, f"{self.url}hub/api/{path}", self.admin_token, body)

    def token(self, user: str, token_scopes: list[str] | None = None) -> str:
        """A new API token of ``user`` (all their scopes, or only ``token_scopes``)."""
        body = {"note": "test"} | ({"scopes": token_scopes} if token_scopes is not None else {})
        code, answer = self.api("POST", f"users/{user}/tokens", body)
        assert code == 201, answer
        return answer["token"]

    def server(self, user: str) -> dict | None:
        return self.api("GET", f"users/{user}")[1]["servers"].get("")

    def start_server(self, user: str) -> None:
        # JupyterHub 6.1 may answer this request 500 when a spawn takes longer than its
        # slow-spawn timeout while it still goes on: what counts is the server becoming ready.
        self.api("POST", f"users/{user}/server")
        wait_for(
            lambda: (self.server(user) or {}).get("ready"),
            120,
            what=f"{user}'s server to start ({self.log_path})",
        )

    def stop_server(self, user: str) -> None:
        self.api("DELETE", f"users/{user}/server")
        wait_for(lambda: self.server(user) is None, 60, what=f"{user}'s server to stop")

    def user_api(self, user: str) -> str:
        """The elastic-gpu API of ``user``'s own server, through the proxy."""
        return f"{self.url}user/{user}/elastic-gpu/api/"

    def service_api(self) -> str:
        return self.url + SERVICE_API


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=3)
    except urllib.error.HTTPError as e:
        return e.code in (401, 403)  # up, and asking who is calling
    except OSError:
        return False
    return True


@pytest.fixture(scope="session")
def hub(tmp_path_factory) -> Iterator[Hub]:
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        _missing("jupyterhub is not installed (pip install 'jupyter-elastic-gpu[hub]')")
    path = proxy_path()
    base = tmp_path_factory.mktemp("hub")
    state = base / "state"
    admin_token = secrets.token_hex(16)
    fast = [f"--{key}={value}" for key, value in FAST_SERVICE.items()]
    extra = base / "test_config.py"
    extra.write_text(
        "c = get_config()  # noqa\n"
        "c.JupyterHub.services[0]['command'] += "
        f"{[*fast, '--activity-interval=1']!r}\n"
        "c.JupyterHub.services.append("
        f"{{'name': 'test-admin', 'api_token': {admin_token!r}}})\n"
        "c.JupyterHub.load_roles.append({'name': 'test-admin', 'services': ['test-admin'], "
        "'scopes': ['admin:users', 'admin:servers', 'admin:groups', 'tokens', 'list:users', 'read:users']})\n"
    )
    port = free_port()
    env = {**os.environ, "PATH": path}
    env.pop("JUPYTERHUB_API_TOKEN", None)
    with open(base / "hub-demo.log", "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_elastic_gpu.cli",
                "hub-demo",
                f"--port={port}",
                "--simulated-gpus=4",
                f"--password={PASSWORD}",
                f"--state-dir={state}",
                f"--extra-config={extra}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    hub = Hub(url, admin_token, state, proc)

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"hub-demo exited: {hub.log_path.read_text()[-3000:]}")
        return _answers(url + "hub/api/") and _answers(url + SERVICE_API + "whoami")

    try:
        wait_for(up, 90, what=f"the Hub and its service to answer ({hub.log_path})")
        yield hub
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        kill_sidecars_under(state)


def synthetic(name: str, work: float, time_scale: float = 1.0) -> dict:
    """A synthetic job (no TensorFlow): ``work`` samples at 100 samples/s on one GPU."""
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 1,
        "synthetic": {
            "work": work,
            "throughput": {"1": 100},
            "batch": 10,
            "time_scale": time_scale,
        },
    }
