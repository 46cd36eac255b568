"""The notebook's job view in JupyterLab, in a real browser (Debian's Chromium via Playwright).

A ``%%elastic_train`` cell's output is the job MIME type, which the lab extension renders as
the sidebar's job card (docs/notebook.md): here it follows a real Keras job through a resize
after the notebook's kernel is gone, so nothing in the kernel feeds it. The kernel is started
by the Jupyter server itself, so the magic finds its scheduler as it does for users, with no
setting. Set ELASTIC_GPU_SCREENSHOT_DIR to keep the screenshots (docs/img/notebook-card-*.png
are those of the docs).
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from browserkit import expect
from nbformat.v4 import new_code_cell, new_notebook
from servers import get_json, wait_for

from jupyter_elastic_gpu.notebook.job import JOB_MIME_TYPE

pytestmark = pytest.mark.slow

#: A small real Keras model that trains for many minutes: it outlives the test, which
#: cancels it from its card.
CELLS = [
    "%load_ext jupyter_elastic_gpu",
    "%%elastic_train --name regression --min-gpus 1 --max-gpus 4\n"
    "import numpy as np\n"
    "import keras\n"
    "rng = np.random.default_rng(0)\n"
    "x = rng.normal(size=(16384, 20)).astype('float32')\n"
    "y = np.tanh(x @ rng.normal(size=(20, 1)) / 4) + 0.1 * rng.normal(size=(16384, 1))\n"
    "model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(32, activation='relu'),\n"
    "                          keras.layers.Dense(1)])\n"
    "model.compile(optimizer=keras.optimizers.SGD(0.002), loss='mse')\n"
    "model.fit(x, y.astype('float32'), batch_size=32, epochs=400, verbose=0)",
]
#: A short urgent job (synthetic: no TensorFlow) on 2 GPUs: the Keras job shrinks for it and
#: grows back when it is done.
URGENT = {
    "name": "urgent",
    "kind": "synthetic",
    "min_gpus": 2,
    "max_gpus": 2,
    "priority": 5,
    "synthetic": {"work": 2000, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
}
#: True once the notebook's debugger button is there (JupyterLab's debugger has looked at the
#: kernel) and no debug request of the page waits for its reply (the kernel connection's
#: pending requests, ``_futures`` in @jupyterlab/services: no public API lists them).
DEBUGGER_ANSWERED = (
    "() => { const w = window.jupyterapp.shell.currentWidget;"
    " const k = w.sessionContext.session.kernel;"
    " return !!w.toolbar.node.querySelector('.jp-DebuggerBugButton')"
    " && Array.from(k._futures.values())"
    ".every(f => f.msg.header.msg_type !== 'debug_request'); }"
)
#: How long the Keras job may take to start, train, shrink and grow on a loaded 2-core machine.
JOB_MS = 300_000


def test_the_card_follows_the_job_without_the_kernel(open_lab, tmp_path):
    nb = new_notebook(
        cells=[new_code_cell(c) for c in CELLS],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
    )
    nbformat.write(nb, tmp_path / "demo.ipynb")
    lab = open_lab(path="tree/demo.ipynb", viewport={"width": 1280, "height": 1000})
    page, server = lab.page, lab.server
    page.wait_for_function(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " const k = w && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel;"
        " return k && k.status === 'idle'; }",
        timeout=120_000,
    )
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

    # The cell's output is the card of the job the cell submitted.
    card = page.locator(".jp-OutputArea-output [data-job-id]")
    expect(card).to_have_count(1, timeout=120_000)
    job_id = card.get_attribute("data-job-id")
    assert server.job(job_id)["name"] == "regression"
    expect(card.locator(".jp-ElasticGpu-jobName")).to_have_text("regression")
    # One output: the job MIME type, with the text for front ends without the extension.
    bundles = page.evaluate(
        "() => { const o = jupyterapp.shell.currentWidget.content.model.cells.get(1).outputs;"
        " return Array.from({length: o.length}, (_, i) => o.get(i).data); }"
    )
    assert [sorted(b) for b in bundles] == [sorted([JOB_MIME_TYPE, "text/plain"])], bundles
    assert bundles[0][JOB_MIME_TYPE] == {"job_id": job_id}
    assert bundles[0]["text/plain"].startswith(f"regression ({job_id}): ")

    # From here on the kernel can do nothing: it is shut down, once JupyterLab's debugger has
    # its answers (it asks the new kernel for its state several times; a shutdown before the
    # last reply makes it log "Could not restore the debugger state: Canceled future").
    page.wait_for_function(DEBUGGER_ANSWERED, timeout=120_000)
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    wait_for(lambda: get_json(server.url + "api/kernels", server.token) == [], 60, what="no kernel")

    expect(card).to_have_attribute("data-job-state", "running", timeout=JOB_MS)
    expect(card.locator("svg.jp-ElasticGpu-lossChart")).to_be_visible(timeout=JOB_MS)
    wait_for(lambda: len(server.job(job_id)["gpus"]) == 4, JOB_MS / 1000, what="4 GPUs")

    # An urgent job takes two GPUs: the card shows the shrink, then the growth back.
    urgent = server.submit(URGENT)
    history = card.locator(".jp-ElasticGpu-resizes")
    expect(history).to_contain_text("resized from 4 to 2 GPUs", timeout=JOB_MS)
    wait_for(lambda: server.job(urgent["id"])["state"] == "done", JOB_MS / 1000, what="urgent")
    expect(history).to_contain_text("resized from 2 to 4 GPUs", timeout=JOB_MS)
    # Both resizes are marked on the loss curve once the job reported steps on each count.
    marks = card.locator(".jp-ElasticGpu-resizeMark")
    expect(marks).to_have_count(2, timeout=JOB_MS)
    expect(marks.first).to_contain_text("4\u21922")
    expect(marks.last).to_contain_text("2\u21924")
    expect(card).to_have_attribute("data-job-state", "running")
    # Trained on for a while after growing back (the picture shows steps after both marks).
    grown = server.job(job_id)["progress"]["global_step"]
    wait_for(
        lambda: server.job(job_id)["progress"]["global_step"] > 1.5 * grown,
        JOB_MS / 1000,
        what="steps after the growth",
    )
    expect(card).to_have_attribute("data-job-state", "running")

    # The card follows the theme (JupyterLab's CSS variables): light and dark differ.
    shots = Path(os.environ.get("ELASTIC_GPU_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    colours = {}
    for theme, name in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        page.evaluate(
            f"() => jupyterapp.commands.execute('apputils:change-theme', {{theme: '{theme}'}})"
        )
        expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
        expect(page.locator("#jupyterlab-splash")).to_have_count(0)  # shown while it switches
        colours[name] = card.evaluate(
            "e => [getComputedStyle(e).backgroundColor,"
            " getComputedStyle(e.querySelector('.jp-ElasticGpu-jobName')).color]"
        )
        shot = shots / f"notebook-card-{name}.png"
        card.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
    assert colours["light"][0] != colours["dark"][0], colours
    assert colours["light"][1] != colours["dark"][1], colours

    # Its Cancel button stops the job, and the card says so.
    card.locator('[data-action="cancel"]').click()
    expect(card).to_have_attribute("data-job-state", "cancelled", timeout=JOB_MS)
    assert server.job(job_id)["state"] == "cancelled"
