"""The shared scheduler's discovery file: written only in a folder of its own that nobody else
may write, never through a link; and add-user's token file that binds a token to its URL."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from servers import DaemonProcess, free_port, wait_for

from jupyter_elastic_gpu.notebook.discovery import discover, read_token_file
from jupyter_elastic_gpu.server.daemon import announce

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


def test_the_daemon_announces_itself_where_only_it_writes(tmp_path):
    d = DaemonProcess(tmp_path, free_port())
    d.state.mkdir(parents=True)
    d.discovery_dir.mkdir(mode=0o755)
    os.chmod(d.discovery_dir, 0o1777)  # as an older version left it
    d.start()
    try:
        text = d.token_file_text("ann")  # the URL it serves, recorded in its state dir
        path = d.discovery_dir / "jupyter-elastic-gpu-scheduler.json"
        doc = wait_for(lambda: path.exists() and json.loads(path.read_text()), 20, what="it")
        assert stat.S_IMODE(d.discovery_dir.stat().st_mode) == 0o755
        assert stat.S_IMODE(path.lstat().st_mode) == 0o644 and path.is_file()
        assert doc["pid"] == d.proc.pid
        # The token file add-user printed names the URL the daemon announces: it is used.
        home = tmp_path / "ann"
        (home / ".jupyter").mkdir(parents=True)
        (home / ".jupyter" / "elastic-gpu-token").write_text(text)
        env = {
            "HOME": str(home),
            "JUPYTER_RUNTIME_DIR": str(tmp_path / "none"),
            "ELASTIC_GPU_DAEMON_DIR": str(d.discovery_dir),
        }
        conn = discover(env)
        assert conn.how == "daemon" and conn.api_url == doc["url"]
        assert conn.client().whoami()["user"] == "ann"
    finally:
        d.stop()
    assert not path.exists()


def test_add_user_prints_the_token_file_lines(tmp_path):
    state = tmp_path / "state"
    args = [sys.executable, "-m", "jupyter_elastic_gpu.cli", "scheduler", "add-user", "ann"]
    res = subprocess.run(
        [*args, "--state-dir", str(state), "--url", "http://box:9200/"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = res.stdout.splitlines()
    assert lines[0] == "url=http://box:9200/elastic-gpu/api/"
    assert lines[1].startswith("token=") and len(lines) == 2
    assert "~/.jupyter/elastic-gpu-token" in res.stderr and "scheduler_url" in res.stderr
    tokens = json.loads((state / "tokens.json").read_text())
    assert tokens[lines[1][len("token=") :]] == {"user": "ann", "admin": False}
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "elastic-gpu-token").write_text(res.stdout)
    saved = read_token_file({"HOME": str(home)})
    assert saved.url == "http://box:9200/elastic-gpu/api/" and saved.token == lines[1][6:]
    # Without --url: the URL the scheduler last served (recorded in its state dir).
    (state / "url").write_text("http://127.0.0.1:9333/elastic-gpu/api/\n")
    res = subprocess.run([*args, "--state-dir", str(state)], capture_output=True, text=True)
    assert res.stdout.splitlines()[0] == "url=http://127.0.0.1:9333/elastic-gpu/api/"


def test_a_link_planted_at_the_file_name_is_replaced_not_followed(tmp_path):
    folder = tmp_path / "announce"
    folder.mkdir(mode=0o755)
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (folder / "jupyter-elastic-gpu-scheduler.json").symlink_to(victim)
    assert announce(folder / "jupyter-elastic-gpu-scheduler.json", {"url": "u", "pid": 1}) is None
    assert victim.read_text() == "untouched"
    path = folder / "jupyter-elastic-gpu-scheduler.json"
    assert not path.is_symlink() and json.loads(path.read_text()) == {"url": "u", "pid": 1}


@needs_root
def test_a_folder_another_user_owns_is_not_written_into(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    os.chown(folder, 54321, 54321)
    problem = announce(folder / "jupyter-elastic-gpu-scheduler.json", {"url": "u", "pid": 1})
    assert "belongs to uid 54321, not to this scheduler's account" in problem
    assert "ELASTIC_GPU_DAEMON_DIR" in problem
    assert list(folder.iterdir()) == []


def test_the_announcement_is_readable_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        path = tmp_path / "fresh" / "jupyter-elastic-gpu-scheduler.json"
        assert announce(path, {"url": "u", "pid": 1}) is None
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
