"""`make start` as a user on a machine without a browser runs it (``LAB_ARGS=--no-browser``):
the URL it prints opens JupyterLab on the demo notebook, not on an empty Lab. Run as root (a
container's user), the Makefile's own command line must start it: the test adds no
``--allow-root``."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from servers import free_port, wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEMO = "elastic-training.ipynb"


def start_command(port: int, root: Path) -> list[str]:
    """The command `make start` runs (read from ``make -n``, so the test follows the Makefile),
    already installed (PIP=true), with this test's state kept under ``root``."""
    lab_args = [
        "--no-browser",
        "--ServerApp.port_retries=0",
        "--ElasticGPUApp.simulated_gpus=4",
        f"--ElasticGPUApp.db_path={root / 'scheduler.sqlite'}",
        f"--SchedulerService.job_root={root / 'jobs'}",
    ]
    make = [
        "make",
        "-n",
        "start",
        f"PYTHON={sys.executable}",
        "PIP=true",
        f"PORT={port}",
        f"LAB_ARGS={shlex.join(lab_args)}",
    ]
    text = subprocess.run(make, cwd=REPO, capture_output=True, text=True, check=True).stdout
    lines = text.replace("\\\n", " ").splitlines()
    (line,) = [line for line in lines if " -m jupyter lab " in line]
    return shlex.split(line)


def test_make_start_allows_root_only_as_root(tmp_path):
    assert ("--allow-root" in start_command(free_port(), tmp_path)) == (os.geteuid() == 0)


def test_the_url_make_start_prints_opens_the_demo_notebook(browser, tmp_path):
    port = free_port()
    log_path = tmp_path / "lab.log"
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
    }
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            start_command(port, tmp_path),
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        printed = re.compile(rf"http://127\.0\.0\.1:{port}/\S*\?token=\w+")

        def url():
            assert proc.poll() is None, log_path.read_text()
            return (printed.findall(log_path.read_text()) or [None])[-1]

        link = wait_for(url, 120, what="the URL the server prints")
        assert f"/lab/tree/examples/{DEMO}?token=" in link, link
        from playwright.sync_api import expect  # the browser fixture skips without it

        page = browser.new_page()
        page.goto(link)
        tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
        expect(tab).to_contain_text(DEMO)
        expect(page.locator(".jp-NotebookPanel:visible")).to_have_count(1)
        page.close()  # before the server stops: the lab would log its requests refused
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited (the failure shown)
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
