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
playwright = pytest.importorskip("playwright.sync_api")

CELLS = [
    "%load_ext jupyter_elastic_gpu",
    "import numpy as np\nrng = np.random.default_rng(0)\n"
    "x = rng.normal(size=(16384, 20)).astype('float32')\n"
    "y = (x @ rng.normal(size=(20, 1))).astype('float32')",
    "%%elastic_train --name mnist-like --min-gpus 1 --max-gpus 4 --pass x,y\n"
    "import keras\n"
    "model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(64, activation='relu'),\n"
    "                          keras.layers.Dense(1)])\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(x, y, batch_size=64, epochs=12, verbose=0)",
]


def test_the_widget_renders_and_follows_the_job(server_process, tmp_path):
    if not Path(CHROMIUM).exists():
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
        page.wait_for_selector(
            ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
        )
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        widget = page.locator(".jp-OutputArea-output .widget-vbox").first
        widget.wait_for(timeout=120_000)
        assert "mnist-like" in widget.inner_text()
        # Running, with progress and the loss curve drawn.
        page.wait_for_function(
            "() => { const t = document.querySelector('.jp-OutputArea-output .widget-vbox');"
            " return t && t.innerText.includes('running') && t.querySelector('svg polyline'); }",
            timeout=180_000,
        )
        page.wait_for_timeout(4000)
        widget.screenshot(path=str(shots / "widget-running.png"))
        text = widget.inner_text()
        assert "GPUs:" in text and "epoch" in text and "samples/s" in text
        assert widget.locator("button:has-text('Cancel')").count() == 1
        page.wait_for_function(
            "() => document.querySelector('.jp-OutputArea-output .widget-vbox')"
            ".innerText.includes('Done. Model:')",
            timeout=300_000,
        )
        widget.screenshot(path=str(shots / "widget-done.png"))
        assert "model = job.load_model()" in widget.inner_text()
        browser.close()
    assert (shots / "widget-running.png").stat().st_size > 10_000
