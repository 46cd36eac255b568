"""The REST client: how a process finds its scheduler, and how HTTP answers become results or
SchedulerError.

Discovery runs against real files and real processes (runtime files of real parent processes,
daemon files naming live and dead pids). HTTP behaviour runs against a small real
``http.server`` that answers like the scheduler's API does (docs/api.md); the scheduler itself
is exercised by the CLI integration tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from servers import free_port

from jupyter_elastic_gpu.notebook.client import (
    Connection,
    SchedulerClient,
    SchedulerError,
    api_root,
)
from jupyter_elastic_gpu.notebook.discovery import daemon_discovery_path, discover

DISCOVER = (
    "import json; from jupyter_elastic_gpu.notebook.discovery import discover; c = discover(); "
    "print(json.dumps([c.api_url, c.token, c.how]))"
)


@pytest.fixture
def dirs(tmp_path):
    """Empty runtime, daemon and home dirs, so that nothing of this machine's leaks in."""
    d = {name: tmp_path / name for name in ("runtime", "daemon", "home")}
    for p in d.values():
        p.mkdir()
    return d


def base_env(dirs) -> dict[str, str]:
    return {
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
        "ELASTIC_GPU_DAEMON_DIR": str(dirs["daemon"]),
        "HOME": str(dirs["home"]),
    }


def child_env(dirs) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ELASTIC_GPU_") and k not in ("JPY_PARENT_PID", "JUPYTERHUB_API_TOKEN")
    }
    env.update(base_env(dirs))
    return env


def server_info(pid: int, **over) -> dict:
    """A runtime file as jupyter_server writes it (ServerApp.server_info)."""
    info = {
        "base_url": "/lab-base/",
        "hostname": "localhost",
        "password": False,
        "pid": pid,
        "port": 8888,
        "root_dir": "/home/ann",
        "secure": False,
        "sock": "",
        "token": "jupyter-token",
        "url": "http://localhost:8888/lab-base/",
        "version": "2.21.1",
    }
    info.update(over)
    return info


def write_runtime(dirs, pid: int, **over) -> None:
    (dirs["runtime"] / f"jpserver-{pid}.json").write_text(json.dumps(server_info(pid, **over)))


def run_child(argv: list[str], dirs) -> list:
    res = subprocess.run(argv, env=child_env(dirs), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield p.pid
    p.kill()
    p.wait()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- discovery ----------------------------------------------------------------------------------


def test_environment_comes_first(dirs):
    (dirs["daemon"] / "jupyter-elastic-gpu-scheduler.json").write_text(
        json.dumps({"url": "http://127.0.0.1:1/elastic-gpu/api/", "pid": os.getpid()})
    )
    env = base_env(dirs) | {
        "ELASTIC_GPU_URL": "http://127.0.0.1:9111/api",
        "ELASTIC_GPU_TOKEN": "t",
    }
    assert discover(env) == Connection("http://127.0.0.1:9111/elastic-gpu/api/", "t", "environment")


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://127.0.0.1:8888/elastic-gpu/api/", "http://127.0.0.1:8888/elastic-gpu/api/"),
        ("http://127.0.0.1:8888/elastic-gpu/api", "http://127.0.0.1:8888/elastic-gpu/api/"),
        ("http://127.0.0.1:8888", "http://127.0.0.1:8888/elastic-gpu/api/"),
        ("http://127.0.0.1:8888/lab?token=abc", "http://127.0.0.1:8888/elastic-gpu/api/"),
        ("http://127.0.0.1:8888/tree/x.ipynb", "http://127.0.0.1:8888/elastic-gpu/api/"),
        ("https://hub.lab/user/ann/lab/tree/a.ipynb", "https://hub.lab/user/ann/elastic-gpu/api/"),
        ("https://hub.lab/user/ann/", "https://hub.lab/user/ann/elastic-gpu/api/"),
        ("http://h/user/ann/elastic-gpu/api/jobs/j-1", "http://h/user/ann/elastic-gpu/api/"),
    ],
)
def test_a_server_url_or_an_api_root_names_the_same_api(url, root):
    assert api_root(url) == root
    assert SchedulerClient(url).base_url == root


def test_the_token_in_a_pasted_server_url_is_used_when_none_is_set(dirs):
    env = base_env(dirs) | {"ELASTIC_GPU_URL": "http://127.0.0.1:8888/lab?token=from-url"}
    assert discover(env) == Connection(
        "http://127.0.0.1:8888/elastic-gpu/api/", "from-url", "environment"
    )
    env["ELASTIC_GPU_TOKEN"] = "explicit"
    assert discover(env).token == "explicit"


def test_environment_url_takes_the_token_file_when_no_token_is_set(dirs):
    (dirs["home"] / ".jupyter").mkdir()
    (dirs["home"] / ".jupyter" / "elastic-gpu-token").write_text("from-file\nignored\n")
    env = base_env(dirs) | {"ELASTIC_GPU_URL": "http://127.0.0.1:9111/elastic-gpu/api/"}
    assert discover(env).token == "from-file"


def test_runtime_file_of_the_parent_process(dirs):
    write_runtime(dirs, os.getpid())  # this test process is the child's parent
    got = run_child([sys.executable, "-c", DISCOVER], dirs)
    assert got == [
        "http://localhost:8888/lab-base/elastic-gpu/api/",
        "jupyter-token",
        "jupyter-server",
    ]


def test_runtime_file_of_a_grandparent(dirs):
    """As from a JupyterLab terminal: server -> shell -> this command."""
    write_runtime(dirs, os.getpid(), base_url="/", url="http://127.0.0.1:8890/", port=8890)
    # `; exit $?` keeps the shell from exec-ing python in its place: the shell stays between.
    code = DISCOVER.replace("print(json.dumps([", "print(json.dumps([os.getppid(), ")
    code = "import os; " + code.replace('"', '\\"')
    got = run_child(["/bin/sh", "-c", f'"{sys.executable}" -c "{code}"; exit $?'], dirs)
    assert got[0] != os.getpid()  # the shell was in between
    assert got[1:] == ["http://127.0.0.1:8890/elastic-gpu/api/", "jupyter-token", "jupyter-server"]


def test_server_on_every_interface_is_reached_on_loopback(dirs):
    write_runtime(dirs, os.getpid(), hostname="0.0.0.0", url="http://box7:8888/lab-base/")
    got = run_child([sys.executable, "-c", DISCOVER], dirs)
    assert got[0] == "http://127.0.0.1:8888/lab-base/elastic-gpu/api/"


def test_jpy_parent_pid_names_the_server(dirs, sleeper):
    write_runtime(dirs, sleeper, token="kernel-server-token")
    conn = discover(base_env(dirs) | {"JPY_PARENT_PID": str(sleeper)})
    assert conn == Connection(
        "http://localhost:8888/lab-base/elastic-gpu/api/", "kernel-server-token", "jupyter-server"
    )


def test_hub_server_without_token_uses_the_hub_api_token(dirs, sleeper):
    write_runtime(dirs, sleeper, token="")
    env = base_env(dirs) | {"JPY_PARENT_PID": str(sleeper), "JUPYTERHUB_API_TOKEN": "hub-tok"}
    assert discover(env).token == "hub-tok"


def test_unix_socket_server_is_skipped_and_said(dirs, sleeper):
    write_runtime(dirs, sleeper, sock="/tmp/jupyter.sock", url="http+unix://%2Ftmp%2Fjupyter.sock/")
    with pytest.raises(SchedulerError, match="unix socket"):
        discover(base_env(dirs) | {"JPY_PARENT_PID": str(sleeper)})


def write_token_file(dirs, text: str) -> None:
    (dirs["home"] / ".jupyter").mkdir(exist_ok=True)
    (dirs["home"] / ".jupyter" / "elastic-gpu-token").write_text(text)


def test_daemon_with_a_live_pid(dirs, sleeper):
    path = daemon_discovery_path(base_env(dirs))
    assert path == dirs["daemon"] / "jupyter-elastic-gpu-scheduler.json"
    path.write_text(json.dumps({"url": "http://127.0.0.1:9111/elastic-gpu/api/", "pid": sleeper}))
    # The token file says which scheduler its token belongs to (add-user prints these lines).
    write_token_file(dirs, "url=http://127.0.0.1:9111/\ntoken=file-token\n")
    assert discover(base_env(dirs)) == Connection(
        "http://127.0.0.1:9111/elastic-gpu/api/", "file-token", "daemon"
    )
    # localhost and 127.0.0.1 are the same loopback scheduler.
    write_token_file(dirs, "url=http://localhost:9111/elastic-gpu/api/\ntoken=file-token\n")
    assert discover(base_env(dirs)).token == "file-token"


def test_daemon_without_a_token_says_how_to_get_one(dirs, sleeper):
    daemon_discovery_path(base_env(dirs)).write_text(
        json.dumps({"url": "http://127.0.0.1:9111/elastic-gpu/api/", "pid": sleeper})
    )
    with pytest.raises(SchedulerError) as err:
        discover(base_env(dirs))
    assert err.value.status is None
    assert "no token for you" in err.value.message
    assert "ELASTIC_GPU_TOKEN" in err.value.message and "add-user" in err.value.message
    assert "url= and token= lines" in err.value.message


def test_daemon_with_a_dead_pid_is_not_used(dirs):
    pid = dead_pid()
    daemon_discovery_path(base_env(dirs)).write_text(
        json.dumps({"url": "http://127.0.0.1:9111/elastic-gpu/api/", "pid": pid})
    )
    with pytest.raises(SchedulerError) as err:
        discover(base_env(dirs) | {"ELASTIC_GPU_TOKEN": "t"})
    assert f"names pid {pid}, which is not running" in err.value.message


def test_nothing_found_says_what_was_tried_and_how_to_fix_it(dirs):
    with pytest.raises(SchedulerError) as err:
        discover(base_env(dirs))
    msg = err.value.message
    assert err.value.status is None
    assert "\n" not in msg
    for part in (
        "no elastic-gpu scheduler found",
        "ELASTIC_GPU_URL is not set",
        f"no Jupyter server among this process's parents ({dirs['runtime']}/jpserver-<pid>.json)",
        f"no shared daemon ({dirs['daemon']}/jupyter-elastic-gpu-scheduler.json does not exist)",
        "`jupyter elastic-gpu scheduler`",
        "set ELASTIC_GPU_URL (the server's URL) and ELASTIC_GPU_TOKEN",
    ):
        assert part in msg, part


def test_default_daemon_dir_is_in_the_system_temp_dir():
    assert daemon_discovery_path({}) == (
        Path(tempfile.gettempdir()) / "jupyter-elastic-gpu" / "jupyter-elastic-gpu-scheduler.json"
    )


# -- HTTP ---------------------------------------------------------------------------------------


def test_refused_connection_is_a_clear_scheduler_error():
    port = free_port()
    client = SchedulerClient(f"http://127.0.0.1:{port}/api", "t")
    with pytest.raises(SchedulerError) as err:
        client.status()
    assert err.value.status is None
    msg = err.value.message
    # The scheduler is named by its root: the route asked for is not the user's concern.
    assert msg.startswith(
        f"cannot reach the scheduler at http://127.0.0.1:{port}/elastic-gpu/api/: "
    )
    assert "Connection refused" in msg
    assert msg.endswith("is JupyterLab (or `jupyter elastic-gpu scheduler`) running?")


def test_a_url_that_is_not_one_is_a_scheduler_error():
    with pytest.raises(SchedulerError, match="not a usable scheduler URL"):
        SchedulerClient("localhost:9111/elastic-gpu/api/").status()


class Api(BaseHTTPRequestHandler):
    """Answers like the scheduler's API; records what it was sent."""

    seen: ClassVar[list[dict]] = []

    def log_message(self, *args):
        pass

    def _answer(self, status: int, doc=None, raw: bytes | None = None, ctype="application/json"):
        body = raw if raw is not None else json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        Api.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "ctype": self.headers.get("Content-Type"),
                "body": json.loads(body) if body else None,
            }
        )

    def do_GET(self):
        self._record()
        path = self.path
        if path.startswith("/elastic-gpu/api/slow"):
            time.sleep(1)
            with contextlib.suppress(OSError):  # the client has hung up by now
                self._answer(200, {})
            return None
        if path == "/elastic-gpu/api/status":
            return self._answer(200, {"gpus": [{"id": "0", "holder": None}], "jobs": []})
        if path.startswith("/elastic-gpu/api/updates"):
            return self._answer(200, {"version": 7})
        if path.startswith("/elastic-gpu/api/jobs/nope"):
            return self._answer(404, {"message": "no job 'nope'", "reason": "not-found"})
        if path == "/elastic-gpu/api/whoami" and self.headers.get("Authorization") != "token t0k":
            return self._answer(401, raw=b"")
        if path == "/elastic-gpu/api/whoami":
            return self._answer(200, {"user": "ann", "admin": False, "mode": "daemon"})
        if path == "/elastic-gpu/api/oops":
            return self._answer(500, raw=b"<html>Internal</html>", ctype="text/html")
        if path == "/elastic-gpu/api/queue":
            return self._answer(200, raw=b"<html>not json</html>", ctype="text/html")
        return self._answer(200, {"echo": path})

    def do_POST(self):
        self._record()
        body = Api.seen[-1]["body"]
        if self.path == "/elastic-gpu/api/jobs" and body.get("min_gpus", 1) > body.get(
            "max_gpus", 99
        ):
            return self._answer(
                400, {"message": "min_gpus (3) is above max_gpus (2)", "reason": "bad-request"}
            )
        if self.path == "/elastic-gpu/api/jobs":
            return self._answer(201, {"id": "j-1", **body})
        return self._answer(202, {"id": "j-1", "state": "stopping"})


@pytest.fixture
def api():
    Api.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/elastic-gpu/api/"
    server.shutdown()
    server.server_close()


def test_json_in_json_out_with_the_token(api):
    c = SchedulerClient(api, "t0k")
    assert c.whoami() == {"user": "ann", "admin": False, "mode": "daemon"}
    assert c.status() == {"gpus": [{"id": "0", "holder": None}], "jobs": []}
    job = c.submit({"kind": "synthetic", "min_gpus": 1, "max_gpus": 2})
    assert job == {"id": "j-1", "kind": "synthetic", "min_gpus": 1, "max_gpus": 2}
    assert c.cancel("j-1") == {"id": "j-1", "state": "stopping"}
    post = Api.seen[2]
    assert (post["method"], post["path"], post["ctype"]) == (
        "POST",
        "/elastic-gpu/api/jobs",
        "application/json",
    )
    assert post["body"] == {"kind": "synthetic", "min_gpus": 1, "max_gpus": 2}
    assert (Api.seen[3]["path"], Api.seen[3]["body"]) == ("/elastic-gpu/api/jobs/j-1/cancel", {})
    assert {s["auth"] for s in Api.seen} == {"token t0k"}


def test_routes_and_query_strings(api):
    c = SchedulerClient(api.rstrip("/"), None)  # the trailing slash is optional
    assert c.logs("j-1", tail=50) == {"echo": "/elastic-gpu/api/jobs/j-1/logs?tail=50"}
    assert c.logs("j-1") == {"echo": "/elastic-gpu/api/jobs/j-1/logs?tail=200"}
    assert c.progress("j-1") == {"echo": "/elastic-gpu/api/jobs/j-1/progress"}
    assert c.progress("j-1", since=12.5) == {
        "echo": "/elastic-gpu/api/jobs/j-1/progress?since=12.5"
    }
    assert c.events("a/b?c") == {"echo": "/elastic-gpu/api/jobs/a%2Fb%3Fc/events"}
    assert c.job("j-2") == {"echo": "/elastic-gpu/api/jobs/j-2"}
    assert (c.gpus(), c.jobs(), c.launches()) == (
        {"echo": "/elastic-gpu/api/gpus"},
        {"echo": "/elastic-gpu/api/jobs"},
        {"echo": "/elastic-gpu/api/launches"},
    )
    assert c.wait_updates(since=3, timeout=1.5) == 7
    assert Api.seen[-1]["path"] == "/elastic-gpu/api/updates?since=3&timeout=1.5"
    assert Api.seen[0]["auth"] is None  # no token, no header


def test_error_json_becomes_scheduler_error_with_status_and_message(api):
    c = SchedulerClient(api, "t0k")
    with pytest.raises(SchedulerError) as err:
        c.submit({"kind": "synthetic", "min_gpus": 3, "max_gpus": 2})
    assert (err.value.status, err.value.reason) == (400, "bad-request")
    assert err.value.message == str(err.value) == "min_gpus (3) is above max_gpus (2)"
    with pytest.raises(SchedulerError) as err:
        c.job("nope")
    assert (err.value.status, err.value.message) == (404, "no job 'nope'")


def test_errors_without_a_json_message_still_say_what_happened(api):
    with pytest.raises(SchedulerError) as err:
        SchedulerClient(api, "wrong").whoami()
    assert err.value.status == 401
    assert err.value.message.startswith(
        f"HTTP 401 Unauthorized from {api}whoami; the token was refused or missing: set "
        "ELASTIC_GPU_TOKEN to a token of the server at http://"
    )
    c = SchedulerClient(api, "t0k")
    with pytest.raises(SchedulerError) as err:
        c._request("GET", "oops")
    assert (err.value.status, err.value.message) == (
        500,
        f"HTTP 500 Internal Server Error from {api}oops",
    )
    with pytest.raises(SchedulerError) as err:
        c.queue()
    assert err.value.status == 200
    assert "did not answer JSON (HTTP 200): <html>not json</html>" in err.value.message


def test_a_proxy_in_the_environment_does_not_catch_loopback_requests(api, monkeypatch):
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert SchedulerClient(api, "t0k").whoami()["user"] == "ann"


def test_a_slow_answer_times_out_as_a_scheduler_error(api):
    with pytest.raises(SchedulerError, match="timed out") as err:
        SchedulerClient(api, "t0k", timeout=0.3)._request("GET", "slow")
    assert err.value.status is None
