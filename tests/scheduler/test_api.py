"""The REST API against a real Jupyter server: authentication, validation, errors."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

ROUTES_GET = [
    "whoami",
    "gpus",
    "jobs",
    "queue",
    "status",
    "updates?timeout=0",
    "launches",
    "jobs/j-x",
    "jobs/j-x/logs",
    "jobs/j-x/events",
    "jobs/j-x/progress",
]

SYNTHETIC = {
    "kind": "synthetic",
    "min_gpus": 1,
    "max_gpus": 2,
    "synthetic": {"work": 1e9, "throughput": {"1": 100, "2": 190}},
}


async def api(jp_fetch, path, method="GET", body=None, **kw):
    parts = ["elastic-gpu", "api", *path.split("?")[0].split("/")]
    params = {}
    if "?" in path:
        for pair in path.split("?")[1].split("&"):
            k, _, v = pair.partition("=")
            params[k] = v
    if body is not None:
        kw["body"] = json.dumps(body) if not isinstance(body, str) else body
    r = await jp_fetch(*parts, method=method, params=params, **kw)
    return r.code, json.loads(r.body or b"{}")


async def api_error(jp_fetch, path, method="GET", body=None, **kw):
    with pytest.raises(HTTPClientError) as info:
        await api(jp_fetch, path, method, body, **kw)
    error = info.value
    try:
        payload = json.loads(error.response.body)
    except (AttributeError, TypeError, ValueError):
        payload = {}
    return error.code, payload


async def test_every_route_needs_authentication(jp_fetch):
    for path in ROUTES_GET:
        code, _ = await api_error(jp_fetch, path, headers={"Authorization": ""})
        assert code == 401, path
    code, _ = await api_error(jp_fetch, "jobs", "POST", SYNTHETIC, headers={"Authorization": ""})
    assert code == 401
    for path in ROUTES_GET:
        code, _ = await api_error(jp_fetch, path, headers={"Authorization": "token wrong"})
        assert code == 401, path


async def test_whoami_and_gpus(jp_fetch):
    code, me = await api(jp_fetch, "whoami")
    assert code == 200 and me["mode"] == "embedded" and me["user"]
    _, gpus = await api(jp_fetch, "gpus")
    assert gpus["source"] == "simulated"
    assert [g["id"] for g in gpus["gpus"]] == ["0", "1", "2", "3"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "not valid JSON"),
        ([1, 2], "must be a JSON object"),
        ({"kind": "script"}, "needs the training code"),
        ({**SYNTHETIC, "min_gpus": -1}, "min_gpus"),
        ({**SYNTHETIC, "min_gpus": 3, "max_gpus": 2}, "min_gpus (3) is above max_gpus (2)"),
        ({**SYNTHETIC, "min_gpus": 8, "max_gpus": 8}, "more than the 4 GPUs"),
        ({**SYNTHETIC, "max_gpus": 2, "requested_gpus": 3}, "requested_gpus (3) must lie between"),
        ({**SYNTHETIC, "colour": "red"}, "colour: unknown field"),
        ({"kind": "synthetic", "synthetic": {"work": 10, "throughput": {}}}, "at least one"),
        ({"kind": "synthetic", "synthetic": {"work": -5, "throughput": {"1": 1}}}, "work"),
        (
            {"kind": "script", "script": "import torch", "framework": "jax"},
            "framework: must be one of 'auto', 'keras', 'lightning', 'transformers' or "
            "'torchrun', got 'jax'",
        ),
        ({**SYNTHETIC, "framework": "keras"}, "'framework' only goes with kind 'script'"),
    ],
)
async def test_bad_submissions_get_400_and_change_nothing(jp_fetch, body, message):
    code, payload = await api_error(jp_fetch, "jobs", "POST", body)
    assert code == 400
    assert message in payload["message"]
    _, jobs = await api(jp_fetch, "jobs")
    assert jobs["jobs"] == []


async def test_unknown_ids_get_404(jp_fetch):
    for path in ("jobs/j-nope", "jobs/j-nope/logs", "jobs/j-nope/events", "jobs/j-nope/progress"):
        code, payload = await api_error(jp_fetch, path)
        assert code == 404 and "no job" in payload["message"]
    code, _ = await api_error(jp_fetch, "jobs/j-nope/cancel", "POST", {})
    assert code == 404
    code, _ = await api_error(jp_fetch, "jobs/bad id!")
    assert code == 404


async def test_heartbeat_needs_the_job_secret(jp_fetch):
    _, job = await api(jp_fetch, "jobs", "POST", SYNTHETIC)
    path = f"sidecar/{job['id']}/heartbeat"
    code, payload = await api_error(jp_fetch, path, "POST", {}, headers={"Authorization": ""})
    assert code == 401 and "Bearer" in payload["message"]
    code, _ = await api_error(jp_fetch, path, "POST", {}, headers={"Authorization": "Bearer wrong"})
    assert code == 401
    await api(jp_fetch, f"jobs/{job['id']}/cancel", "POST", {})


async def test_submit_then_cancel_a_queued_job(jp_fetch):
    code, job = await api(jp_fetch, "jobs", "POST", {**SYNTHETIC, "name": "my job"})
    assert code == 201 and job["state"] in ("queued", "starting") and job["name"] == "my job"
    code, again = await api(jp_fetch, f"jobs/{job['id']}")
    assert code == 200 and again["id"] == job["id"]
    code, cancelled = await api(jp_fetch, f"jobs/{job['id']}/cancel", "POST", {})
    assert code == 202 and cancelled["state"] in ("cancelled", "stopping")
    _, events = await api(jp_fetch, f"jobs/{job['id']}/events")
    assert events["events"][0]["kind"] == "submitted"
