"""The JupyterLab panel's push channel, ``ws?view=panel``: a snapshot of what ``GET gpus``,
``GET queue`` and ``GET jobs`` answer, then deltas with only what changed."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openapi_check import validate
from tornado.httpclient import HTTPClientError

from jupyter_elastic_gpu.server import panel
from jupyter_elastic_gpu.server.updates_socket import WS_PUMP

MESSAGE = "#/components/schemas/UpdateMessage"


# -- the list delta, on its own ----------------------------------------------------------------

ids = st.lists(st.sampled_from([f"j{i}" for i in range(8)]), unique=True, max_size=8)


@given(before=ids, after=ids, values=st.lists(st.integers(0, 2), min_size=8, max_size=8))
def test_a_list_delta_applied_by_the_documented_rules_gives_the_new_list(before, after, values):
    old = [{"id": i, "v": 0} for i in before]
    new = [{"id": i, "v": values[int(i[1:])]} for i in after]
    docs = {"gpus": {"gpus": []}, "queue": {"queue": old}, "jobs": {"jobs": old}}
    fresh = {"gpus": {"gpus": []}, "queue": {"queue": new}, "jobs": {"jobs": new}}
    message = panel.delta(7, docs, fresh)
    if old == new:
        assert message is None
        return
    assert panel.apply(docs, message) == fresh


def entry(i: int, **over) -> dict:
    """A queue entry of the size the API answers."""
    return {
        "id": f"j-{i:010d}",
        "user": "ann",
        "state": "queued",
        "gpus": [],
        "min_gpus": 1,
        "max_gpus": 4,
        "position": i + 1,
        "reason": "queued: needs 1 GPU, 0 free; GPUs held by 64 jobs that are shorter",
        "name": f"job {i}",
        "estimated_start": 1_800_000_000.0 + i,
        "estimated_end": 1_800_003_600.0 + i,
        **over,
    }


def test_one_change_among_500_costs_one_entry_and_a_new_job_at_the_end_no_order():
    before = [entry(i) for i in range(500)]
    docs = {"gpus": {"gpus": []}, "queue": {"queue": before}, "jobs": {"jobs": []}}
    whole = len(json.dumps(panel.snapshot(1, docs)))
    one = [*before[:250], entry(250, reason="queued: needs 1 GPU, 1 free"), *before[251:]]
    message = panel.delta(2, docs, {**docs, "queue": {"queue": one}})
    validate(message, MESSAGE)
    assert message["queue"] == {"changed": [one[250]]}
    assert len(json.dumps(message)) < 2 * len(json.dumps(one[250])) < whole / 200
    added = [*before, entry(500)]
    message = panel.delta(3, docs, {**docs, "queue": {"queue": added}})
    assert message["queue"] == {"changed": [added[500]]}  # appended: no order needed
    moved = [before[1], before[0], *before[2:]]
    message = panel.delta(4, docs, {**docs, "queue": {"queue": moved}})
    assert message["queue"] == {"order": [e["id"] for e in moved]}


# -- a real server ------------------------------------------------------------------------------

SYNTHETIC = {
    "kind": "synthetic",
    "min_gpus": 4,
    "max_gpus": 4,
    "synthetic": {"work": 1e9, "throughput": {"4": 100}},
}


async def next_message(ws, timeout: float = 30.0) -> dict:
    raw = await asyncio.wait_for(ws.read_message(), timeout)
    assert raw is not None, "the socket closed"
    message = json.loads(raw)
    validate(message, MESSAGE)
    return message


async def until(ws, check, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = await next_message(ws, deadline - time.monotonic())
        if check(message):
            return message
    raise AssertionError(f"no message with {what} within {timeout} s")


def pumps() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if t.get_name() == WS_PUMP and not t.done()]


async def test_subscribe_submit_see_the_delta_and_a_closed_socket_stops_its_pump(
    jp_fetch, jp_ws_fetch
):
    async def rest(*path, **kw):
        return json.loads((await jp_fetch("elastic-gpu", "api", *path, **kw)).body)

    first = await rest("jobs", method="POST", body=json.dumps({**SYNTHETIC, "name": "first"}))
    ws = await jp_ws_fetch("elastic-gpu", "api", "ws", params={"view": "panel"})
    snapshot = await next_message(ws)
    assert snapshot["type"] == "snapshot"
    # The same documents the REST routes answer.
    assert snapshot["gpus"]["gpus"] == (await rest("gpus"))["gpus"]
    assert [j["id"] for j in snapshot["jobs"]["jobs"]] == [first["id"]]
    assert [e["id"] for e in snapshot["queue"]["queue"]] == [first["id"]]

    second = await rest("jobs", method="POST", body=json.dumps({**SYNTHETIC, "name": "second"}))

    def shows_second(message):
        changed = message.get("jobs", {}).get("changed", [])
        return message["type"] == "delta" and second["id"] in {j["id"] for j in changed}

    delta = await until(ws, shows_second, 30, "the new job")
    assert delta["version"] > snapshot["version"]
    assert "removed" not in delta.get("jobs", {})
    # Its place in the queue, and when it is expected to start: after the first one.
    queue = await rest("queue")
    waiting = next(e for e in queue["queue"] if e["id"] == second["id"])
    assert waiting["estimated_start"] is not None and waiting["name"] == "second"

    assert len(pumps()) == 1
    ws.close()
    deadline = time.monotonic() + 30
    while pumps() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not pumps(), "the pump of a closed socket goes on"
    for job in (first, second):
        await rest("jobs", job["id"], "cancel", method="POST", body="{}")


async def test_the_status_view_is_unchanged_and_an_unknown_view_is_refused(jp_fetch, jp_ws_fetch):
    ws = await jp_ws_fetch("elastic-gpu", "api", "ws")
    message = await next_message(ws)
    assert message["type"] == "update" and set(message["status"]) == {
        "gpus",
        "jobs",
        "hidden",
        "idle",
        "idle_kind",
        "idle_figures",
    }
    ws.close()
    with pytest.raises(HTTPClientError) as refused:
        await jp_ws_fetch("elastic-gpu", "api", "ws", params={"view": "everything"})
    assert refused.value.code == 400


async def test_the_panel_reaches_the_version_the_scheduler_is_at(jp_fetch, jp_ws_fetch):
    """Changes that land while a delta is being made are not left behind: the last message
    carries the scheduler's current version (a delta with no document when nothing this caller
    sees changed), so a panel never stays one version behind."""

    async def rest(*path, **kw):
        return json.loads((await jp_fetch("elastic-gpu", "api", *path, **kw)).body)

    ws = await jp_ws_fetch("elastic-gpu", "api", "ws", params={"view": "panel"})
    await next_message(ws)
    jobs = [
        await rest("jobs", method="POST", body=json.dumps({**SYNTHETIC, "name": f"j{i}"}))
        for i in range(6)
    ]
    for job in jobs[:3]:
        await rest("jobs", job["id"], "cancel", method="POST", body="{}")
    current = (await rest("updates", params={"since": -1, "timeout": 0}))["version"]
    await until(ws, lambda m: m["version"] >= current, 30, f"version {current}")
    for job in jobs[3:]:
        await rest("jobs", job["id"], "cancel", method="POST", body="{}")
    ws.close()
