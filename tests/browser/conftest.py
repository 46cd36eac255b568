"""Fixtures of the browser tests: JupyterLab servers (any base URL, the server extension on or
off, a shared scheduler that is down) and Debian's Chromium driven by Playwright.

Each lab gets its own settings and workspaces folders, so a test starts from JupyterLab's
defaults (no news prompt) and leaves nothing in the user's home.

Every page a test opens is watched: a console error or an uncaught error on it fails the test
(at its teardown), unless ``NOT_OURS`` allows it or the test itself does
(``page_errors.allow``), so that no error of our pages goes unnoticed.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from needs import missing
from servers import JupyterServerProcess, call, free_port, get_json, kill_sidecars_under

from jupyter_elastic_gpu.server.handlers import API_PREFIX

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


#: Console errors that are not our pages' (a regular expression on the message: why it may
#: appear). Nothing here yet: every error so far was ours.
NOT_OURS: dict[str, str] = {}
#: Lines of each error a failure shows (its message and the top of its stack).
STACK_LINES = 5


class PageErrors:
    """The console errors and uncaught errors of every page opened through ``watch``ed
    contexts, less those allowed."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.allowed = {re.compile(pattern): why for pattern, why in NOT_OURS.items()}

    def watch(self, context: Any) -> Any:
        context.on("console", self._console)
        context.on("weberror", self._uncaught)
        return context

    def allow(self, pattern: str, why: str) -> None:
        """Let the console errors that match ``pattern`` pass in this test (``why``: what
        the test does that makes them)."""
        self.allowed[re.compile(pattern)] = why

    def allow_status(self, status: int, why: str, path: str = f"/{API_PREFIX}/") -> None:
        """Let pass the browser's own reports of a URL under ``path`` (our API by default)
        answering ``status`` to a request or to a websocket's handshake: the test makes it
        answer so (``why``)."""
        at = re.escape(path)
        self.allow(rf"{at}\S*:0\): Failed to load resource: .* status of {status}\b", why)
        self.allow(rf"WebSocket connection to '[^']*{at}[^']*' failed: .* code: {status}\b", why)

    def unexpected(self) -> list[str]:
        return [e for e in self.seen if not any(p.search(e) for p in self.allowed)]

    def _console(self, message: Any) -> None:
        if message.type == "error":
            where = message.location
            source = f"{where.get('url')}:{where.get('lineNumber')}"
            self._add(f"console error on {_url(message.page)} ({source}): {message.text}")

    def _uncaught(self, error: Any) -> None:
        self._add(f"uncaught error on {_url(error.page)}: {error.error.stack or error.error}")

    def _add(self, text: str) -> None:
        self.seen.append("\n".join(text.splitlines()[:STACK_LINES]))


def _url(page: Any) -> str:
    return page.url if page else "?"


class WatchedBrowser:
    """Chromium, whose every context (and ``new_page``'s own) reports to ``errors``."""

    def __init__(self, browser: Any, errors: PageErrors) -> None:
        self._browser, self.errors = browser, errors

    def new_context(self, **kwargs: Any) -> Any:
        return self.errors.watch(self._browser.new_context(**kwargs))

    def new_page(self, **kwargs: Any) -> Any:
        page = self._browser.new_page(**kwargs)
        self.errors.watch(page.context)
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)


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
def page_errors() -> Iterator[PageErrors]:
    """What went wrong on the test's pages: any error not allowed fails the test once its
    pages are closed."""
    errors = PageErrors()
    yield errors
    unexpected = errors.unexpected()
    if unexpected:
        pytest.fail(
            f"{len(unexpected)} error(s) on the test's pages:\n" + "\n".join(unexpected[:10]),
            pytrace=False,
        )


@pytest.fixture
def browser(page_errors) -> Iterator[Any]:
    """Debian's Chromium, its pages' errors watched. Per test: the sync API's event loop must
    start and end inside the test, between pytest-jupyter's set-up and tear-down of its own
    loop."""
    if playwright is None:
        missing("playwright is not installed")
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", ".ci/install-test-deps installs it")
    playwright.expect.set_options(timeout=EXPECT_MS)
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield WatchedBrowser(chromium, page_errors)
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
