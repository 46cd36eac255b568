"""The job widget rendered in JupyterLab, in a real browser (Debian's Chromium via Playwright).

The kernel here is started by the Jupyter server itself, so the magic finds its scheduler the
way it does for users: from the server that started the kernel, with no setting at all. Set
ELASTIC_GPU_SCREENSHOT_DIR to keep the screenshot (docs/img/ holds the one in the README).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from servers import free_port

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
try:
    from playwright import sync_api as playwright
except ImportError:  # CI installs it (the test extras); elsewhere it is optional
    if os.environ.get("CI"):
        raise
    pytest.skip("playwright is not installed (make test installs it)", allow_module_level=True)

CELLS = [
    "%load_ext jupyter_elastic_gpu",
    "import numpy as np\nrng = np.random.default_rng(0)\n"
    "x = rng.normal(size=(16384, 20)).astype('float32')\n"
    "y = (x @ rng.normal(size=(20, 1))).astype('float32')",
    "%%elastic_train --name regression --min-gpus 1 --max-gpus 4 --pass x,y --as first\n"
    "import keras\n"
    "model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(64, activation='relu'),\n"
    "                          keras.layers.Dense(1)])\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(x, y, batch_size=64, epochs=400, verbose=0)",
    "first.wait(until='training')",
    "%%elastic_train --name urgent --min-gpus 2 --max-gpus 2 --priority 5 --pass x,y\n"
    "import keras\n"
    "model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(1)])\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(x, y, batch_size=64, epochs=3, verbose=0)",
]


def snap(page, path: Path, index: int = 0) -> None:
    """Screenshot of the widget; the output can be re-rendered under us, so retry."""
    no_news = page.locator(".Toastify__toast button:has-text('No')")
    if no_news.count():
        no_news.first.click(timeout=5_000)
    for _ in range(5):
        try:
            page.locator(".jp-OutputArea-output .widget-vbox").nth(index).screenshot(path=str(path))
            return
        except playwright.Error:
            page.wait_for_timeout(500)
    raise AssertionError("the widget kept being re-rendered; no screenshot")


def test_the_widget_renders_and_follows_the_job(server_process, tmp_path):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(
                "Debian's chromium is missing: .ci/install-test-deps should have installed it"
            )
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    nb = new_notebook(
        cells=[new_code_cell(c) for c in CELLS],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
    )
    nbformat.write(nb, tmp_path / "demo.ipynb")
    server = server_process(port=free_port(), extra_args=["--LabApp.expose_app_in_browser=True"])
    url = f"{server.url}lab/tree/demo.ipynb?token={server.token}"
    shots = Path(os.environ.get("ELASTIC_GPU_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
        page.wait_for_function(
            "() => { const w = window.jupyterapp.shell.currentWidget;"
            " const k = w && w.sessionContext && w.sessionContext.session"
            " && w.sessionContext.session.kernel;"
            " return k && k.status === 'idle'; }",
            timeout=120_000,
        )
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        widget = page.locator(".jp-OutputArea-output .widget-vbox").first
        try:
            widget.wait_for(timeout=120_000)
        except playwright.Error:
            page.screenshot(path=str(shots / "no-widget.png"))
            raise
        assert "regression" in widget.inner_text()
        # Running, resized for the urgent job, with progress and the loss curve drawn.
        page.wait_for_function(
            "() => { const t = document.querySelector('.jp-OutputArea-output .widget-vbox');"
            " return t && t.innerText.includes('running') && t.innerText.includes('4 → 2')"
            " && t.innerText.includes('samples/s')"
            " && t.querySelector('svg polyline'); }",
            timeout=180_000,
        )
        snap(page, shots / "widget-running.png")
        text = widget.inner_text()
        assert "GPUs:" in text and "epoch" in text and "samples/s" in text
        # The urgent job runs on the two GPUs it took, and ends.
        page.wait_for_function(
            "() => { const v = document.querySelectorAll('.jp-OutputArea-output .widget-vbox');"
            " return v.length > 1 && v[1].innerText.includes('Done. Model:'); }",
            timeout=300_000,
        )
        snap(page, shots / "widget-done.png", index=1)
        assert (
            "model = job.load_model()"
            in page.locator(".jp-OutputArea-output .widget-vbox").nth(1).inner_text()
        )
        # The Cancel button of the first job stops it.
        page.locator(".jp-OutputArea-output .widget-vbox").first.locator(
            "button:has-text('Cancel')"
        ).click()
        page.wait_for_function(
            "() => document.querySelector('.jp-OutputArea-output .widget-vbox')"
            ".innerText.includes('Cancelled.')",
            timeout=120_000,
        )
        browser.close()
    assert (shots / "widget-running.png").stat().st_size > 10_000
