"""The scheduler live, inside a real Jupyter server, over real sidecars on 4 simulated GPUs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from apikit import api, until


def synthetic(name, work, max_gpus, min_gpus=1):
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": work, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
    }


def replicas_reported(job_dir: str) -> list[int]:
    """The replica counts the trainer itself wrote, in order, without repeats."""
    out: list[int] = []
    path = Path(job_dir) / "progress.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            n = json.loads(line).get("replicas")
            if n and (not out or out[-1] != n):
                out.append(n)
    return out


async def job_state(jp_fetch, job_id, *states):
    job = await api(jp_fetch, f"jobs/{job_id}")
    return job if job["state"] in states else None


async def test_long_job_shrinks_for_a_short_one_and_grows_back(jp_fetch):
    a = await api(jp_fetch, "jobs", "POST", synthetic("A", 60_000, 4))

    async def a_on(*counts):
        job = await api(jp_fetch, f"jobs/{a['id']}")
        n = len(job["gpus"])
        ok = job["state"] == "running" and n in counts
        ok = ok and (job["progress"] or {}).get("replicas") == n
        return job if ok else None

    await until(lambda: a_on(4), 40, "A alone on 4 GPUs")
    b = await api(jp_fetch, "jobs", "POST", synthetic("B", 2_000, 2))
    # A is the critical path (nearly all the work): it keeps what ends it in time, 3 GPUs, and
    # gives B the rest (by the order alone it would give 2).
    shrunk = await until(lambda: a_on(1, 2, 3), 40, "A resized for B")
    n = len(shrunk["gpus"])
    b_running = await until(lambda: job_state(jp_fetch, b["id"], "running", "done"), 30, "B runs")
    assert len(b_running["gpus"]) in (0, 4 - n)
    await until(lambda: job_state(jp_fetch, b["id"], "done"), 60, "B to finish")
    a_final = await until(lambda: a_on(4), 60, "A back on 4 GPUs")

    # The trainer itself reported the replica counts it ran with.
    # (On a loaded machine its measured speeds may shrink it once more while B runs.)
    counts = replicas_reported(a_final["job_dir"])
    back = counts.index(4, 1)
    assert counts[:2] == [4, n] and all(c < 4 for c in counts[1:back]), counts
    # Every change has its reason in the event log.
    events = (await api(jp_fetch, f"jobs/{a['id']}/events"))["events"]
    resizes = [e for e in events if e["kind"] == "resize"]
    steps = [(len(e["data"]["from"]), len(e["data"]["to"])) for e in resizes]
    assert steps[0] == (4, n), steps
    # The same path as the trainer's: each change starts where the last one ended, up to 4 again.
    assert all(a[1] == b[0] for a, b in itertools.pairwise(steps)), steps
    up = next(i for i, step in enumerate(steps) if step[1] == 4)
    assert [step[1] for step in steps[: up + 1]] == counts[1 : back + 1], (steps, counts)
    assert all(e["message"].count(":") >= 1 and len(e["message"]) > 30 for e in resizes)
    assert a_final["resizes"] >= 2 and a_final["history"]
    await api(jp_fetch, f"jobs/{a['id']}/cancel", "POST", {})
    cancelled = await until(lambda: job_state(jp_fetch, a["id"], "cancelled"), 30, "A cancelled")
    assert cancelled["finished_at"]


async def test_status_queue_and_progress_views(jp_fetch):
    job = await api(jp_fetch, "jobs", "POST", synthetic("views", 3_000, 2))
    await until(lambda: job_state(jp_fetch, job["id"], "done"), 60, "the job to finish")
    status = await api(jp_fetch, "status")
    assert [g["id"] for g in status["gpus"]] == ["0", "1", "2", "3"]
    entry = next(j for j in status["jobs"] if j["id"] == job["id"])
    assert set(entry) >= {"id", "name", "user", "state", "gpus", "min_gpus", "max_gpus", "progress"}
    assert set(entry["progress"]) >= {"epoch", "step", "replicas"}
    progress = (await api(jp_fetch, f"jobs/{job['id']}/progress"))["progress"]
    assert progress and progress[-1]["samples"] >= 3_000 - 10
    logs = await api(jp_fetch, f"jobs/{job['id']}/logs")
    assert "generation" in logs["sidecar"] or logs["sidecar"]
    done = await api(jp_fetch, f"jobs/{job['id']}")
    assert done["progress"]["fraction"] == pytest.approx(1.0, abs=0.01)


TF_SCRIPT = """
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 16)).astype("float32")
y = (x @ rng.normal(size=(16, 1))).astype("float32")
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, batch_size=32, epochs=8, verbose=0)
"""


@pytest.mark.slow
async def test_a_tensorflow_job_is_resized_live(jp_fetch):
    a = await api(
        jp_fetch,
        "jobs",
        "POST",
        {"name": "keras", "script": TF_SCRIPT, "min_gpus": 1, "max_gpus": 4, "measure_noise": True},
    )

    async def a_running_on(*counts):
        job = await api(jp_fetch, f"jobs/{a['id']}")
        if job["state"] in ("failed", "cancelled"):
            raise AssertionError(f"the TF job ended: {job['error']}")
        p = job["progress"] or {}
        return job if job["state"] == "running" and p.get("replicas") in counts else None

    await until(lambda: a_running_on(4), 120, "the TF job on 4 simulated GPUs")
    b = await api(jp_fetch, "jobs", "POST", synthetic("B", 1_500, 2))
    shrunk = await until(lambda: a_running_on(1, 2, 3), 120, "the TF job resized for B")
    n = shrunk["progress"]["replicas"]
    await until(lambda: job_state(jp_fetch, b["id"], "done"), 120, "B to finish")
    done = await until(lambda: job_state(jp_fetch, a["id"], "done"), 300, "the TF job to finish")
    seen = replicas_reported(done["job_dir"])
    assert seen[:2] == [4, n]
    assert done["model_path"] and Path(done["model_path"]).exists()
    records = [
        json.loads(line)
        for line in (Path(done["job_dir"]) / "progress.jsonl").read_text().splitlines()
    ]
    steps = [r["global_step"] for r in records]
    assert steps == sorted(steps) and steps[-1] == 8 * 4096 // 32  # no step lost or repeated
    # the noise scale the trainer measured reaches the job's view, with the batch it is for
    assert done["measure_noise"] is True
    assert done["progress"]["batch_size"] == 32 and done["progress"]["noise_steps"] > 0
    assert "noise_scale" in done["progress"]
    events = (await api(jp_fetch, f"jobs/{a['id']}/events"))["events"]
    assert any(e["kind"] == "resize" and len(e["data"]["to"]) == n for e in events)
