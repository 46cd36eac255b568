"""What the sidebar says about waiting, in a real browser: why GPUs sit idle (a line under the
GPUs, ``[data-idle-reason]``, from ``GET gpus``' ``idle``) and when a queued job starts (said
once on its card: the clock time and whose end it waits for).

The scenario is the plainest one that leaves GPUs idle for a reason: a one-GPU job runs on a
box of four, and a job that needs all four waits for it. Set ELASTIC_GPU_SCREENSHOT_DIR to keep
the screenshot.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browserkit import expect
from servers import call

pytestmark = pytest.mark.slow

#: 100 samples/s on one GPU: a job of this many samples runs about 5 minutes, longer than the test.
FIVE_MINUTES = 3e4
#: Samples of a synthetic job that outlives any test.
FOREVER = 1e8


def synthetic(name: str, work: float, gpus: int) -> dict:
    """A synthetic job (no TensorFlow) of exactly ``gpus`` GPUs."""
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": gpus,
        "max_gpus": gpus,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
    }


def test_idle_gpus_and_a_queued_start_are_explained_once(open_lab, tmp_path):
    lab = open_lab()
    lab.show_panel()
    expect(lab.gpus).to_have_count(4)
    server = lab.server
    first = server.submit(synthetic("one-gpu", FIVE_MINUTES, 1))
    expect(lab.job(first["id"])).to_have_attribute("data-job-state", "running")
    big = server.submit(synthetic("all-four", FOREVER, 4))
    card = lab.job(big["id"])
    expect(card).to_have_attribute("data-job-state", "queued")

    # Three GPUs idle, because the job that could use them needs four.
    idle = lab.panel.locator("[data-idle-reason]")
    said = re.compile(r"^3 GPUs idle: 'all-four' needs 4")  # the owner's job, by its name
    expect(idle).to_have_text(said)
    expect(idle).to_have_attribute("data-idle-reason", said)
    expect(idle).to_be_visible()
    assert said.match(server_idle := _get(server, "gpus")["idle"]), server_idle
    grid = lab.panel.locator(".jp-ElasticGpu-gpus").bounding_box()
    line = idle.bounding_box()
    assert grid and line and line["y"] >= grid["y"] + grid["height"], (grid, line)

    # The queued job says when it starts once: the clock time (with the date when that is
    # tomorrow: a run a few minutes before midnight), and whose end it waits for (by the name
    # its owner gave it).
    start = card.locator(".jp-ElasticGpu-start")
    expect(start).to_have_text(
        re.compile(
            r"^Starts about (?:\w+ \d\d? )?\d\d?:\d\d.*\(in \d+ min\), when one-gpu finishes\."
        )
    )
    reason = card.locator(".jp-ElasticGpu-reason")
    expect(reason).to_have_text(re.compile(r"^needs 4 GPUs, 3 free"))
    assert "starts" not in reason.inner_text()
    # ... which the scheduler's reason says too (the CLI and the API keep it whole).
    [entry] = [e for e in _get(server, "queue")["queue"] if e["id"] == big["id"]]
    assert re.search(r"; starts in ~\d+ min, when 'one-gpu' finishes$", entry["reason"])
    after = entry["reason_figures"]["start_after"]
    assert (after["id"], after["name"]) == (first["id"], "one-gpu")
    _screenshot(lab, tmp_path)

    # The one-GPU job goes, the big one takes all four: no GPU idle, no line.
    code, answer = call("POST", f"{server.api_url}jobs/{first['id']}/cancel", server.token)
    assert code == 202, answer
    expect(card).to_have_attribute("data-job-state", "running")
    expect(lab.gpus_in("held")).to_have_count(4)
    expect(idle).to_have_count(0)
    assert _get(server, "gpus")["idle"] is None


def _get(server, route: str) -> dict:
    code, doc = call("GET", server.api_url + route, server.token)
    assert code == 200, doc
    return doc


def _screenshot(lab, tmp_path: Path) -> None:
    folder = Path(os.environ.get("ELASTIC_GPU_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    lab.panel.screenshot(path=str(folder / "sidebar-idle-and-queued.png"))
