"""Notifications of a user's jobs and the status-bar item, in a real browser (Debian's Chromium
via Playwright) on a real server with simulated GPUs.

A job's start, end and failure show in JupyterLab's notification centre (its toasts and the
bell's count) without the sidebar open; what was told is not told again after a reload, and
what ended while no page was open is told when one opens; the setting
``jupyter-elastic-gpu:notifications`` turns them off. The status-bar item
``#elastic-gpu-status`` counts GPUs in use and jobs queued and opens the sidebar. Set
ELASTIC_GPU_SCREENSHOT_DIR to keep the screenshots (docs/img/notification-done.png
and docs/img/statusbar.png are those of the README).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from browserkit import expect
from servers import call, wait_for
from test_sidebar import FOREVER, synthetic

pytestmark = pytest.mark.slow

#: The status-bar item (docs/sidebar.md, the DOM contract).
STATUS_ITEM = "#elastic-gpu-status"
#: JupyterLab's toasts, and the bell of its notification centre (its text: the count).
TOAST = ".Toastify__toast"
BELL = ".jp-Notification-Status"
SETTINGS_PLUGIN = "jupyter-elastic-gpu:notifications"
#: Where the page remembers what it told (localStorage keys).
MEMORY_PREFIX = "jupyter-elastic-gpu:told:"
#: A job that trains for about 10 s on one GPU.
SHORT_WORK = 1000


def toasts(lab, text: str):
    return lab.page.locator(TOAST, has_text=text)


def wait_watching(lab) -> None:
    """Until the page's notifier has looked at the state (its memory, docs/sidebar.md, is
    written): what is true when it first looks is not news, what happens after is."""
    lab.page.wait_for_function(
        f"() => Object.keys(localStorage).some(k => k.startsWith('{MEMORY_PREFIX}'))",
        timeout=60_000,
    )


def state_of(lab, job: dict) -> str:
    return lab.server.job(job["id"])["state"]


def set_notifications(lab, enabled: bool) -> None:
    """Save the setting on the server, as JupyterLab's settings editor does."""
    url = f"{lab.server.url}lab/api/settings/{SETTINGS_PLUGIN}"
    code, answer = call("PUT", url, lab.server.token, {"raw": json.dumps({"enabled": enabled})})
    assert code == 204, answer


def test_a_job_that_starts_and_finishes_is_told_without_the_sidebar(open_lab):
    lab = open_lab()
    wait_watching(lab)
    if lab.panel.is_visible():  # restored open: these notifications need no sidebar
        lab.tab.click()
    job = lab.server.submit(synthetic("short-run", SHORT_WORK))
    expect(toasts(lab, 'GPU job "short-run" started on 1 GPU')).to_be_visible()
    done = toasts(lab, 'GPU job "short-run" is done')
    expect(done).to_be_visible(timeout=120_000)
    assert state_of(lab, job) == "done"
    expect(lab.panel).to_be_hidden()

    # Its button opens the job's log in the main area.
    done.get_by_role("button", name="Show log").click()
    lab.page.wait_for_function(
        "() => Array.from(jupyterapp.shell.widgets('main'))"
        f".some(w => w.content && w.content.jobId === '{job['id']}')",
        timeout=60_000,
    )


def test_a_failed_job_is_told_with_its_error(open_lab):
    lab = open_lab()
    wait_watching(lab)
    job = lab.server.submit(
        {"name": "broken", "script": "raise ValueError('the data folder is empty')\n"}
    )
    failed = toasts(lab, 'GPU job "broken" failed: ValueError: the data folder is empty')
    expect(failed).to_be_visible(timeout=180_000)
    assert state_of(lab, job) == "failed"
    expect(failed.get_by_role("button", name="Show log")).to_be_visible()


def test_nothing_is_told_twice_and_what_ended_while_away_is_told(open_lab):
    lab = open_lab()
    page = lab.page
    wait_watching(lab)
    job = lab.server.submit(synthetic("while-away", SHORT_WORK))
    expect(toasts(lab, 'GPU job "while-away" started')).to_be_visible()

    page.goto("about:blank")  # no page of the lab is open while the job ends
    wait_for(lambda: state_of(lab, job) == "done", 120, what="the job to finish")
    lab.open()
    expect(toasts(lab, 'GPU job "while-away" is done')).to_be_visible()
    # Told in the same update as any other news of this job: the start is not told again.
    expect(page.locator(BELL)).to_have_text("1")
    expect(toasts(lab, "started")).to_have_count(0)

    # A reload tells nothing: the page is current (the status bar shows it) and silent.
    page.reload()
    lab.wait_restored()
    expect(page.locator(STATUS_ITEM)).to_have_attribute("data-gpus-used", "0")
    lab.show_panel()
    expect(lab.job(job["id"])).to_have_attribute("data-job-state", "done")
    expect(page.locator(TOAST)).to_have_count(0)
    expect(page.locator(BELL)).to_have_text("0")


def test_the_setting_turns_notifications_off(open_lab):
    lab = open_lab()
    wait_watching(lab)
    set_notifications(lab, False)
    lab.page.reload()
    lab.wait_restored()
    lab.show_panel()
    job = lab.server.submit(synthetic("unannounced", SHORT_WORK))
    card = lab.job(job["id"])
    expect(card).to_have_attribute("data-job-state", "running")
    expect(card).to_have_attribute("data-job-state", "done", timeout=120_000)
    expect(lab.page.locator(TOAST)).to_have_count(0)
    expect(lab.page.locator(BELL)).to_have_text("0")

    # On again: from then on, without the news of before.
    set_notifications(lab, True)
    lab.page.reload()
    lab.wait_restored()
    wait_watching(lab)  # off forgot everything: the memory is new
    lab.server.submit(synthetic("announced", FOREVER))
    expect(toasts(lab, 'GPU job "announced" started on 1 GPU')).to_be_visible()
    expect(lab.page.locator(BELL)).to_have_text("1")  # not the job that ended before


def test_the_status_bar_item_counts_and_opens_the_sidebar(open_lab):
    # The item counts what the scheduler decided; ``static`` never preempts, so that the job
    # that runs stays the one that started (adaptive may swap two long jobs on what they
    # measured, which depends on the machine's load).
    lab = open_lab(extra_args=["--SchedulerService.policy=static"])
    item = lab.page.locator(STATUS_ITEM)
    expect(item).to_have_text("GPUs 0/4 in use")
    if lab.panel.is_visible():
        lab.tab.click()
    expect(lab.panel).to_be_hidden()

    lab.server.submit(synthetic("three", FOREVER, 3, 3))
    expect(item).to_have_text("GPUs 3/4 in use")
    lab.server.submit(synthetic("two", FOREVER, 2, 2))
    expect(item).to_have_text("GPUs 3/4 in use \u00b7 1 queued")
    expect(item).to_have_attribute("data-gpus-used", "3")
    expect(item).to_have_attribute("data-jobs-queued", "1")
    assert "1 queued" in item.get_attribute("title")

    item.click()
    expect(lab.panel).to_be_visible()
    expect(lab.gpus_in("held")).to_have_count(3)


def test_screenshots_of_a_notification_and_the_status_bar_item(open_lab, tmp_path):
    (tmp_path / "train.ipynb").write_text(
        json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    lab = open_lab(viewport={"width": 1280, "height": 800})
    page, server = lab.page, lab.server
    wait_watching(lab)
    if lab.panel.is_visible():
        lab.tab.click()
    server.submit(synthetic("resnet50-sweep", FOREVER, 2, 2))
    server.submit(synthetic("vit-pretrain", FOREVER, 4, 4))
    job = server.submit(synthetic("mnist", SHORT_WORK, 1, 2, notebook="train.ipynb"))
    done = toasts(lab, 'GPU job "mnist" is done')
    expect(done).to_be_visible(timeout=120_000)
    assert state_of(lab, job) == "done"
    item = page.locator(STATUS_ITEM)
    expect(item).to_have_attribute("data-jobs-queued", "1")
    expect(done.get_by_role("button", name="Open notebook")).to_be_visible()

    shots = Path(os.environ.get("ELASTIC_GPU_SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    done.hover()  # a toast stays while the pointer is on it
    done.screenshot(path=str(shots / "notification-done.png"))
    bar = page.locator("#jp-main-statusbar").bounding_box()
    box = item.bounding_box()
    page.screenshot(
        path=str(shots / "statusbar.png"),
        clip={
            "x": 0,
            "y": bar["y"],
            "width": box["x"] + box["width"] + 40,
            "height": bar["height"],
        },
    )
    for name in ("notification-done.png", "statusbar.png"):
        assert (shots / name).stat().st_size > 2_000
