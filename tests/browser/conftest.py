"""Fixtures of the browser tests: JupyterLab servers (any base URL, the server extension on or
off, a shared scheduler that is down) and Debian's Chromium driven by Playwright.

Each lab gets its own settings and workspaces folders, so a test starts from JupyterLab's
defaults (no news prompt) and leaves nothing in the user's home.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from servers import JupyterServerProcess, call, free_port, get_json, kill_sidecars_under

try:
    from playwright import sync_api as playwright
except ImportError:  # CI installs it (the test extras); elsewhere it is optional
    playwright = None

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Debian's Chromium as Playwright can drive it here (no browser download, no sandbox).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
#: The sidebar's Lumino widget id: its tab is ``[data-id=PANEL_ID]``, the panel ``#PANEL_ID``.
PANEL_ID = "elastic-gpu-queue"
SHOW_COMMAND = "elastic-gpu:show-queue"
#: How long an assertion on the page waits for its condition (a loaded 2-core machine).
EXPECT_MS = 60_000
#: Lab settings every test starts from: no news prompt over the page.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    }
}


class LabServer(JupyterServerProcess):
    """`jupyter server` with JupyterLab and the extension under ``base_url``; ``extension``
    False starts it with the elastic-gpu server extension disabled (the lab extension stays)."""

    def __init__(self, *, base_url: str = "/", extension: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base_url = base_url
        lab_dirs = self.root / f"{self.name}-lab"
        for name, settings in LAB_SETTINGS.items():
            path = lab_dirs / "settings" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(settings))
        self.env = {
            "JUPYTERLAB_SETTINGS_DIR": str(lab_dirs / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(lab_dirs / "workspaces"),
            **self.env,
        }
        self.extra_args = [
            f"--ServerApp.base_url={base_url}",
            "--LabApp.expose_app_in_browser=True",
            f"--ServerApp.jpserver_extensions=jupyter_elastic_gpu={extension}",
            *self.extra_args,
        ]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_url}"

    @property
    def runtime_dir(self) -> Path:
        return self.root / f"{self.name}-runtime"

    def submit(self, body: dict) -> dict:
        code, job = call("POST", self.api_url + "jobs", self.token, body)
        assert code == 201, f"submit answered {code}: {job}"
        return job

    def job(self, job_id: str) -> dict:
        return get_json(f"{self.api_url}jobs/{job_id}", self.token)

    def jobs(self) -> list[dict]:
        return get_json(self.api_url + "jobs", self.token)["jobs"]

    def workspace(self) -> dict:
        """The default workspace JupyterLab saved on the server (its layout)."""
        return get_json(f"{self.url}lab/api/workspaces/default", self.token)


class LabPage:
    """JupyterLab open in a browser page, and the selectors of the sidebar's DOM contract
    (docs/sidebar.md). Every request and websocket the page opens is recorded."""

    panel_id = PANEL_ID
    show_command = SHOW_COMMAND

    def __init__(self, server: LabServer, page: Any) -> None:
        self.server, self.page = server, page
        self.requests: list[str] = []
        self.sockets: list[Any] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("websocket", lambda ws: self.sockets.append(ws))
        self.tab = page.locator(f'[data-id="{PANEL_ID}"]')
        self.panel = page.locator(f"#{PANEL_ID}")
        self.gpus = self.panel.locator("[data-gpu-index]")
        self.message = self.panel.locator("[data-panel-message]")

    def open(self, path: str = "") -> None:
        """Load ``lab/<path>`` and wait until JupyterLab has restored its layout."""
        self.page.goto(
            f"{self.server.url}lab{'/' + path if path else ''}?token={self.server.token}"
        )
        self.wait_restored()

    def wait_restored(self) -> None:
        self.page.wait_for_function("() => window.jupyterapp !== undefined", timeout=EXPECT_MS)
        self.page.evaluate("() => window.jupyterapp.restored.then(() => true)")

    def show_panel(self) -> None:
        self.page.evaluate(f"() => window.jupyterapp.commands.execute('{SHOW_COMMAND}')")
        playwright.expect(self.panel).to_be_visible()

    def job(self, job_id: str) -> Any:
        return self.panel.locator(f'[data-job-id="{job_id}"]')

    def gpus_in(self, state: str) -> Any:
        return self.panel.locator(f'[data-gpu-index][data-gpu-state="{state}"]')

    def off_base(self) -> list[str]:
        """URLs of this server the page asked for outside its base URL."""
        origin = f"127.0.0.1:{self.server.port}"
        urls = self.requests + [ws.url for ws in self.sockets]
        return [
            u
            for u in urls
            if urlsplit(u).netloc == origin
            and not urlsplit(u).path.startswith(self.server.base_url)
        ]


@pytest.fixture
def browser() -> Iterator[Any]:
    """Debian's Chromium. Per test: the sync API's event loop must start and end inside the
    test, between pytest-jupyter's set-up and tear-down of its own loop."""
    if playwright is None:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed: the test extras should have installed it")
        pytest.skip("playwright is not installed (make test installs it)")
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing: .ci/install-test-deps installs it")
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    playwright.expect.set_options(timeout=EXPECT_MS)
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_lab(browser, tmp_path) -> Iterator[Any]:
    """``open_lab(path="", viewport=..., scheduler=True, **LabServer arguments)``: start a lab
    server under ``tmp_path`` and open it in a fresh browser context; returns a LabPage.
    ``scheduler`` False waits for the Jupyter server only (no scheduler is expected)."""
    servers: list[LabServer] = []
    contexts: list[Any] = []

    def start(
        path: str = "",
        viewport: dict | None = None,
        scheduler: bool = True,
        **kwargs: Any,
    ) -> LabPage:
        kwargs.setdefault("root", tmp_path)
        kwargs.setdefault("port", free_port())
        kwargs.setdefault("name", f"lab{len(servers)}")
        server = LabServer(**kwargs)
        servers.append(server)
        server.start(scheduler=scheduler)
        context = browser.new_context(viewport=viewport or {"width": 1280, "height": 900})
        contexts.append(context)
        lab = LabPage(server, context.new_page())
        lab.open(path)
        return lab

    yield start
    for context in contexts:
        context.close()
    for server in servers:
        server.stop()
    kill_sidecars_under(tmp_path)
