"""A discovery file is written in a shared folder: it may name a URL, never earn a token.

The attack: another local user writes a discovery file naming their own server (and a live
pid), and `jupyter elastic-gpu status` sends the victim's token there. Each test runs the
real client (or the real CLI in a child process) against a real HTTP server that records what
it was sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from jupyter_elastic_gpu.errors import ExitCode
from jupyter_elastic_gpu.notebook.client import Connection, SchedulerError
from jupyter_elastic_gpu.notebook.discovery import (
    daemon_discovery_path,
    discover,
    read_token_file,
    token_file_text,
)

REAL = "http://127.0.0.1:9111/"  # the scheduler the user's token belongs to


class Listener(BaseHTTPRequestHandler):
    """A local process posing as the scheduler: it records every request's credentials."""

    seen: ClassVar[list[str | None]] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        Listener.seen.append(self.headers.get("Authorization"))
        body = json.dumps({"gpus": [], "jobs": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def forger():
    """(URL of the forger's server, its record of requests)."""
    Listener.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Listener)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/elastic-gpu/api/", Listener.seen
    server.shutdown()
    server.server_close()


@pytest.fixture
def home(tmp_path):
    """A user's home with the token file add-user printed for the real scheduler, and an
    empty runtime dir and discovery folder."""
    for name in ("home/.jupyter", "runtime", "daemon"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "home/.jupyter/elastic-gpu-token").write_text(token_file_text(REAL, "ann-token"))
    env = {
        "HOME": str(tmp_path / "home"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "ELASTIC_GPU_DAEMON_DIR": str(tmp_path / "daemon"),
    }
    return tmp_path, env


def announce(env, url: str, pid: int | None = None) -> None:
    path = daemon_discovery_path(env)
    path.write_text(json.dumps({"url": url, "pid": pid or os.getpid()}))


def test_the_token_file_holds_the_url_with_the_token(home):
    root, env = home
    saved = read_token_file(env)
    assert (saved.url, saved.token) == ("http://127.0.0.1:9111/elastic-gpu/api/", "ann-token")
    path = root / "home/.jupyter/elastic-gpu-token"
    path.write_text("# mine\ntoken=t2\nurl=http://h:1/\n")
    assert read_token_file(env) == type(saved)("t2", "http://h:1/")
    path.write_text("legacy-token\n")  # the old format: a token alone, no URL
    assert read_token_file(env) == type(saved)("legacy-token", None)


def test_a_forged_discovery_file_gets_no_token_from_the_cli(home, forger):
    _, env = home
    url, seen = forger
    announce(env, url)  # a live pid (this process), the forger's URL
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("ELASTIC_GPU_", "JPY"))}
    res = subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "status"],
        env={**child_env, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == ExitCode.UNREACHABLE, res.stderr
    assert seen == [], "the forger's server was sent a request"
    message = res.stderr
    assert f"announces a scheduler at {url}" in message
    assert "your token belongs to http://127.0.0.1:9111/elastic-gpu/api/" in message
    assert "set ELASTIC_GPU_URL=http://127.0.0.1:9111/elastic-gpu/api/" in message
    assert "ann-token" not in message


def test_the_real_announcement_is_used(home, forger):
    """The same file naming the URL recorded with the token: the token goes there."""
    root, env = home
    url, seen = forger
    (root / "home/.jupyter/elastic-gpu-token").write_text(token_file_text(url, "ann-token"))
    announce(env, url)
    conn = discover(env)
    assert conn == Connection(url, "ann-token", "daemon")
    assert conn.client().status() == {"gpus": [], "jobs": []}
    assert seen == ["token ann-token"]


def test_an_environment_token_alone_is_never_sent_to_a_discovered_url(home, forger):
    root, env = home
    url, seen = forger
    (root / "home/.jupyter/elastic-gpu-token").unlink()
    announce(env, url)
    with pytest.raises(SchedulerError) as err:
        discover({**env, "ELASTIC_GPU_TOKEN": "env-token"})
    assert "ELASTIC_GPU_TOKEN alone is never sent to a discovered scheduler" in err.value.message
    assert f"set ELASTIC_GPU_URL={url}" in err.value.message
    # Named explicitly, the URL gets the environment's token.
    conn = discover({**env, "ELASTIC_GPU_TOKEN": "env-token", "ELASTIC_GPU_URL": url})
    assert (conn.token, conn.how) == ("env-token", "environment")
    assert seen == []


def test_a_token_file_without_a_url_is_not_sent_to_a_discovered_url(home, forger):
    root, env = home
    url, seen = forger
    (root / "home/.jupyter/elastic-gpu-token").write_text("legacy-token\n")
    announce(env, url)
    with pytest.raises(SchedulerError, match="add the line `url=<your scheduler's URL>`"):
        discover(env)
    assert seen == []


def test_a_token_bound_to_one_url_is_not_sent_to_another_named_one(home):
    """ELASTIC_GPU_URL without ELASTIC_GPU_TOKEN takes the file's token only for its URL."""
    _, env = home
    assert discover({**env, "ELASTIC_GPU_URL": REAL}).token == "ann-token"
    assert discover({**env, "ELASTIC_GPU_URL": "http://127.0.0.1:9/"}).token is None


@pytest.mark.parametrize("case", ["folder-writable", "file-writable", "symlink"])
def test_an_announcement_others_could_have_written_is_ignored(home, forger, case):
    root, env = home
    url, seen = forger
    (root / "home/.jupyter/elastic-gpu-token").write_text(token_file_text(url, "ann-token"))
    path = daemon_discovery_path(env)
    if case == "symlink":
        real = root / "elsewhere.json"
        real.write_text(json.dumps({"url": url, "pid": os.getpid()}))
        path.symlink_to(real)
        why = "it is not a regular file"
    else:
        announce(env, url)
        if case == "folder-writable":
            os.chmod(path.parent, 0o1777)
            why = "is writable by other users, so anyone could have written it (a current"
        else:
            os.chmod(path, 0o666)
            why = "it is writable by other users"
    with pytest.raises(SchedulerError) as err:
        discover(env)
    assert f"ignored {path}: " in err.value.message and why in err.value.message
    assert seen == []
