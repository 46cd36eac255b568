"""An interactive GPU lease in the sidebar, in a real browser: a "Python 3 (1 GPU)" kernel
started through the server's REST API (as JupyterLab's launcher starts it) gets its lease from
the scheduler through the kernel provisioner; the sidebar shows the lease's card (its badge and
its GPU) and the GPU held by it; **Release** gives the GPU back, and the kernel lives on
without it (docs/interactive-gpus.md, docs/sidebar.md). Set ELASTIC_GPU_SCREENSHOT_DIR to keep
a screenshot of the card.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browserkit import expect
from servers import call, leased_kernel_env, wait_for

from jupyter_elastic_gpu.kernels.specs import spec_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kernel_env(tmp_path) -> dict:
    """Kernel specs "Python 3 (N GPUs)" for N in (1,), as ``leased_kernel_env`` writes them."""
    return leased_kernel_env(tmp_path / "jupyter-data", (1,))


def start_leased_kernel(server, spec: str) -> tuple[str, dict]:
    """Start a kernel of ``spec`` through the server's REST API (as JupyterLab's launcher
    does) and wait until its lease runs; returns the kernel's id and the lease."""
    code, kernel = call("POST", server.url + "api/kernels", server.token, {"name": spec})
    assert code == 201, kernel
    lease = wait_for(
        lambda: next(
            (j for j in server.jobs() if j["kind"] == "interactive" and j["state"] == "running"),
            None,
        ),
        30,
        what=f"the lease of a {spec} kernel to run",
    )
    return kernel["id"], lease


def test_a_kernel_lease_shows_in_the_sidebar_and_release_frees_it(open_lab, kernel_env):
    lab = open_lab(env=kernel_env)
    lab.show_panel()
    expect(lab.gpus_in("free")).to_have_count(4)
    server = lab.server
    kernel, lease = start_leased_kernel(server, spec_name(1))
    assert len(lease["gpus"]) == 1 and len(server.jobs()) == 1, lease
    gpu = lease["gpus"][0]

    # Its card: the badge, the GPU it holds, Release (not Suspend/Cancel); its GPU held by it.
    card = lab.job(lease["id"])
    expect(card).to_have_attribute("data-job-state", "running")
    expect(card).to_have_attribute("data-job-kind", "interactive")
    expect(card.locator(".jp-ElasticGpu-lease")).to_have_text("interactive lease")
    expect(card.locator(".jp-ElasticGpu-jobMeta")).to_contain_text(f"holds 1 GPU ({gpu})")
    expect(card.locator(".jp-ElasticGpu-jobName")).to_have_text(lease["name"] or lease["id"])
    release = card.locator('[data-action="cancel"]')
    expect(release).to_have_text("Release")
    expect(card.locator('[data-action="suspend"]')).to_have_count(0)
    expect(card.locator('[data-action="logs"]')).to_have_count(0)  # nothing runs: no log
    held = lab.panel.locator(f'[data-gpu-id="{gpu}"]')
    expect(held).to_have_attribute("data-gpu-state", "held")
    expect(lab.gpus_in("held")).to_have_count(1)
    expect(held.locator(".jp-ElasticGpu-gpuHolder")).to_have_text(
        re.compile(re.escape(lease["name"] or lease["id"]))
    )

    if os.environ.get("ELASTIC_GPU_SCREENSHOT_DIR"):
        shots = Path(os.environ["ELASTIC_GPU_SCREENSHOT_DIR"])
        lab.panel.screenshot(path=str(shots / "sidebar-lease.png"))

    # Release: the lease ends, its GPU is free again, and the kernel lives on without it.
    release.click()
    ended = re.compile(r"^(done|cancelled)$")
    expect(lab.panel.locator(f'[data-job-id="{lease["id"]}"]').first).to_have_attribute(
        "data-job-state", ended
    )
    expect(lab.gpus_in("free")).to_have_count(4)
    after = wait_for(
        lambda: (j := server.job(lease["id"]))["state"] in ("done", "cancelled") and j,
        30,
        what="the lease to end",
    )
    assert after["gpus"] == [], after
    code, gpus = call("GET", server.api_url + "gpus", server.token)
    assert code == 200 and all(g["holder"] is None for g in gpus["gpus"]), gpus
    code, alive = call("GET", f"{server.url}api/kernels/{kernel}", server.token)
    assert code == 200, alive


def test_a_mig_slice_lease_shows_under_its_gpu_with_its_holder(open_lab, kernel_env):
    """A box with an H100 in MIG mode (two 1g.10gb instances) and a T4: a "Python 3 (1g.10gb
    MIG slice)" kernel gets one instance; the H100's tile lists both with who holds each and
    says NVML reports no utilisation there; the lease's card says it holds a slice."""
    lab = open_lab(env=kernel_env, config={"simulated_gpus": "H100-80GB[2x1g.10gb],T4"})
    lab.show_panel()
    slices = lab.panel.locator("[data-slice-uuid]")
    expect(slices).to_have_count(2)
    expect(lab.panel.locator('[data-slice-state="free"]')).to_have_count(2)
    _, lease = start_leased_kernel(lab.server, spec_name(1, "1g.10gb"))
    (held,) = lease["gpus"]
    row = lab.panel.locator(f'[data-slice-uuid="{held}"]')
    expect(row).to_have_attribute("data-slice-state", "held")
    expect(row).to_have_attribute("data-slice-profile", "1g.10gb")
    expect(row.locator(".jp-ElasticGpu-sliceHolder")).to_have_text(
        f"{lease['name'] or lease['id']} (you)"
    )
    tile = lab.panel.locator('[data-gpu-id="0"]')
    expect(tile).to_have_attribute("data-gpu-mig", "2")
    expect(tile.locator(".jp-ElasticGpu-gpuUtil")).to_have_text("utilisation not reported (MIG)")
    card = lab.job(lease["id"])
    expect(card.locator(".jp-ElasticGpu-jobMeta")).to_contain_text(
        f"holds a 1g.10gb MIG slice ({held})"
    )
    expect(card.locator(".jp-ElasticGpu-reason")).to_contain_text(
        "holds a 1g.10gb MIG slice for its notebook kernel"
    )
    card.locator('[data-action="cancel"]').click()  # Release: the slice is free again
    expect(lab.panel.locator('[data-slice-state="free"]')).to_have_count(2)


def test_an_idle_kernel_s_lease_is_announced_before_its_gpus_go(open_lab, kernel_env):
    """Idle reclaim's warning reaches the user in JupyterLab (a notification that stays), not
    only as the lease's reason on its card: here after 3 s of idleness, a release at 10 min."""
    rules = {"idle_timeout": 600.0, "idle_timeout_contended": 0.0, "idle_warning": 597.0}
    config = {f"InteractiveLeases.{name}": value for name, value in rules.items()}
    lab = open_lab(env=kernel_env, config=config)
    lab.page.wait_for_function(  # the notifier has looked: what comes next is news
        "() => Object.keys(localStorage).some(k => k.startsWith('jupyter-elastic-gpu:told:'))",
        timeout=60_000,
    )
    server = lab.server
    code, kernel = call("POST", server.url + "api/kernels", server.token, {"name": spec_name(1)})
    assert code == 201, kernel
    toast = lab.page.locator(".Toastify__toast", has_text="loses its GPUs in")
    expect(toast).to_be_visible(timeout=60_000)
    expect(toast).to_contain_text("unless it runs code")
    [lease] = [j for j in server.jobs() if j["kind"] == "interactive"]
    assert lease["state"] == "running" and lease["reason"].startswith("idle: "), lease
