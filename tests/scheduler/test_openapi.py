"""The OpenAPI document against the code, so that neither can drift from the other.

The document is generated from the route table and the models (``make generate``); it must
list exactly the routes the handlers implement, and every answer a real server gives (and
every heartbeat a real sidecar sends) must be valid under the schema the document declares
for that route and status.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from apikit import until
from elastic_gpu_sidecar import protocol as P
from openapi_check import HTTP_METHODS, document, documented, response_pointer, validate
from servers import (
    DaemonProcess,
    HeartbeatRecorder,
    call,
    free_port,
    sidecar_python,
    wait_for,
)

from jupyter_elastic_gpu import models as M
from jupyter_elastic_gpu.models import push
from jupyter_elastic_gpu.scheduler.port import openapi
from jupyter_elastic_gpu.scheduler.port.routes import PATH_PARAMETERS as PATTERNS
from jupyter_elastic_gpu.server.handlers import ROUTES, handlers

GROUP = re.compile(r"\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)")


def implemented() -> set[tuple[str, str]]:
    """(path, method) for every route of ROUTES, from the methods its handler defines."""
    pairs = set()
    for route, handler in ROUTES:
        if route == "ws":  # a websocket: no HTTP operation
            continue
        path = "/" + GROUP.sub(r"{\1}", route)
        for method in ("get", "post", "put", "patch", "delete"):
            own = next((c for c in handler.__mro__ if method in vars(c)), None)
            if own is not None and own.__module__.startswith("jupyter_elastic_gpu"):
                pairs.add((path, method))
    return pairs


# -- the document against the code, statically ------------------------------------------------


def test_the_document_lists_exactly_the_implemented_routes():
    assert documented() == implemented()
    # The websocket is a path without HTTP operations, and the Jupyter handlers serve it.
    bare = {p for p, item in document()["paths"].items() if not set(item) & set(HTTP_METHODS)}
    assert bare == {"/ws"}
    assert any(pattern.endswith("elastic-gpu/api/ws") for pattern, _ in handlers())


#: Path parameter -> (its pattern in the routes, its name among the document's parameters).
PATH_PARAMETERS = {
    name: (f"(?P<{name}>{PATTERNS[name].pattern})", param)
    for name, param in (("job_id", "JobId"), ("gpu_id", "GpuId"), ("kernel_id", "KernelId"))
}


def test_path_parameters_match_the_route_patterns():
    for name, (pattern, param_name) in PATH_PARAMETERS.items():
        group = re.fullmatch(rf"\(\?P<{name}>(.*)\)", pattern)
        assert group, pattern
        param = document()["components"]["parameters"][param_name]
        assert param["schema"]["pattern"] == f"^{group.group(1)}$"
    for path, item in document()["paths"].items():
        names = set(re.findall(r"{(\w+)}", path))
        declared = {
            p["name"] if "name" in p else p["$ref"].rsplit("/", 1)[1]
            for p in item.get("parameters", [])
        }
        # A group name is any name JupyterHub allows (checked by the route, not a pattern).
        params = {n: p for n, (_, p) in PATH_PARAMETERS.items()} | {"group": "Group"}
        assert names <= set(params), path
        assert declared == {params[n] for n in names}, path


#: Schema in the document -> the model that makes it (every model the routes name).
MODELS = {model.__name__: model for model in openapi.models() if model is not push.UpdateMessage}
#: Enum schema in the document -> the vocabulary it must equal.
ENUMS = {
    "JobState": P.JobState,
    "SidecarState": P.SidecarState,
    "GrantAction": P.GrantAction,
    "BatchPolicy": P.BatchPolicy,
    "Mechanism": P.Mechanism,
    "JobKind": P.JobKind,
    "EventKind": M.EventKind,
}


@pytest.mark.parametrize("schema", sorted(MODELS))
def test_every_schema_has_the_fields_of_its_model(schema):
    spec = document()["components"]["schemas"][schema]
    model = MODELS[schema]
    assert set(spec["properties"]) == set(model.model_fields), schema
    if model.model_config.get("extra") == "forbid":  # both refuse unknown fields
        assert spec.get("additionalProperties") is False, schema


@pytest.mark.parametrize("schema", sorted(ENUMS))
def test_every_enum_of_the_document_is_the_vocabulary(schema):
    assert document()["components"]["schemas"][schema]["enum"] == list(ENUMS[schema].values())


def test_the_document_is_valid_openapi():
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(document())


# -- real answers against the document ---------------------------------------------------------


@pytest.fixture
def recorder():
    with HeartbeatRecorder() as r:
        yield r


@pytest.fixture
def jp_server_config(jp_server_config, recorder, tmp_path):
    """The real sidecar, started through a wrapper that points its heartbeats at the recorder."""
    jp_server_config["LocalLauncher"] = {"python": sidecar_python(recorder, tmp_path)}
    return jp_server_config


class Api:
    """Calls one documented operation and validates the answer against the document."""

    def __init__(self, fetch) -> None:
        self.fetch = fetch
        self.called: set[tuple[str, str]] = set()

    async def __call__(self, method, template, *, body=None, headers=None, params=None, **ids):
        path = template.format(**ids).strip("/").split("/")
        kw = {}
        if body is not None:
            kw["body"] = body if isinstance(body, str) else json.dumps(body)
        elif method == "POST":
            kw["body"] = "{}"
        r = await self.fetch(
            "elastic-gpu",
            "api",
            *path,
            method=method,
            headers=headers,
            params=params,
            raise_error=False,
            **kw,
        )
        assert r.code != 599, f"{method} {template}: no answer ({r.error})"
        payload = json.loads(r.body)
        validate(payload, response_pointer(template, method.lower(), r.code))
        self.called.add((template, method.lower()))
        return r.code, payload


def synthetic(name: str, min_gpus: int, max_gpus: int) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": 1e9, "throughput": {"1": 100, "2": 190, "4": 360}, "batch": 10},
    }


async def test_real_answers_and_heartbeats_match_the_document(
    jp_fetch, jp_ws_fetch, jp_serverapp, recorder
):
    recorder.target = jp_serverapp.connection_url
    api = Api(jp_fetch)

    # A bad submit: refused by the server and by the document alike, and nothing is created.
    bad = {**synthetic("bad", 1, 2), "colour": "red"}
    code, error = await api("POST", "/jobs", body=bad)
    assert code == 400 and "colour" in error["message"]
    with pytest.raises(AssertionError):
        validate(bad, "#/components/schemas/SubmitRequest")
    code, _ = await api("POST", "/jobs", body="not json")
    assert code == 400
    code, _ = await api("GET", "/whoami", headers={"Authorization": ""})
    assert code == 401

    # A job that runs, and one that waits behind it.
    body = synthetic("runs", 1, 4)
    validate(body, "#/components/schemas/SubmitRequest")
    code, job = await api("POST", "/jobs", body=body)
    assert code == 201 and job["state"] in ("queued", "starting")
    job_id = job["id"]

    async def running_with_progress():
        _, j = await api("GET", "/jobs/{job_id}", job_id=job_id)
        has_rate = (j["progress"] or {}).get("samples_per_s")
        return j if j["state"] == "running" and has_rate else None

    await until(running_with_progress, 30, "the job to run and report its speed")
    code, waiting = await api("POST", "/jobs", body={**synthetic("waits", 4, 4), "priority": 0.5})
    assert code == 201

    async def queued():
        _, q = await api("GET", "/queue")
        entry = next(e for e in q["queue"] if e["id"] == waiting["id"])
        return q if entry["state"] == "queued" and entry["position"] == 1 else None

    await until(queued, 20, "the second job to wait in the queue")

    # Every GET route, with something in it.
    for template in ("/whoami", "/gpus", "/status", "/launches"):
        code, _ = await api("GET", template)
        assert code == 200, template
    _, jobs = await api("GET", "/jobs")
    assert {j["id"] for j in jobs["jobs"]} == {job_id, waiting["id"]}
    _, logs = await api("GET", "/jobs/{job_id}/logs", job_id=job_id, params={"tail": 5})
    assert logs["sidecar"]
    _, events = await api("GET", "/jobs/{job_id}/events", job_id=job_id)
    assert {"submitted", "admitted", "running"} <= {e["kind"] for e in events["events"]}
    _, progress = await api("GET", "/jobs/{job_id}/progress", job_id=job_id)
    assert progress["progress"]
    since = progress["progress"][-1]["t"]
    await api("GET", "/jobs/{job_id}/progress", job_id=job_id, params={"since": since})
    _, version = await api("GET", "/updates", params={"since": 0, "timeout": 0})
    assert version["version"] > 0

    # The errors each route can give.
    for template in ("/jobs/{job_id}", "/jobs/{job_id}/events", "/jobs/{job_id}/progress"):
        code, _ = await api("GET", template, job_id="j-nope")
        assert code == 404, template
    code, _ = await api("GET", "/jobs/{job_id}/logs", job_id=job_id, params={"tail": "many"})
    assert code == 400
    code, _ = await api("GET", "/jobs/{job_id}/progress", job_id=job_id, params={"since": "x"})
    assert code == 400
    code, _ = await api("GET", "/updates", params={"since": "soon"})
    assert code == 400
    code, _ = await api("POST", "/jobs/{job_id}/cancel", job_id="j-nope")
    assert code == 404

    # The owner suspends and resumes; priorities and drains are for admins (this user is none).
    code, held = await api("POST", "/jobs/{job_id}/suspend", job_id=waiting["id"])
    assert code == 202 and held["held"]
    code, resumed = await api("POST", "/jobs/{job_id}/resume", job_id=waiting["id"])
    assert code == 200 and not resumed["held"]
    code, _ = await api(
        "POST", "/jobs/{job_id}/priority", job_id=waiting["id"], body={"priority": 2}
    )
    assert code == 403
    code, _ = await api("POST", "/gpus/{gpu_id}/drain", gpu_id="0", body={"drained": True})
    assert code == 403
    for auth in ("", "Bearer not-the-secret"):
        code, _ = await api(
            "POST",
            "/sidecar/{job_id}/heartbeat",
            job_id=job_id,
            body={"job_id": job_id},
            headers={"Authorization": auth},
        )
        assert code == 401

    # An interactive lease (docs/interactive-gpus.md), and a kernel this server does not run.
    code, _ = await api("POST", "/leases", body={"gpus": 0})
    assert code == 400
    code, lease = await api("POST", "/leases", body={"gpus": 1, "name": "kernel-test"})
    assert code == 201 and lease["job"]["kind"] == "interactive" and lease["secret"]
    code, _ = await api("POST", "/kernels/{kernel_id}/lease", kernel_id="nope", body={"gpus": 1})
    assert code == 404
    code, _ = await api("POST", "/jobs/{job_id}/cancel", job_id=lease["job"]["id"])
    assert code == 202

    # The websocket's first message.
    ws = await jp_ws_fetch("elastic-gpu", "api", "ws")
    message = json.loads(await ws.read_message())
    ws.close()
    validate(message, "#/components/schemas/UpdateMessage")
    assert job_id in {j["id"] for j in message["status"]["jobs"]}

    # Cancel both: the queued one at once, the running one through its sidecar.
    code, cancelled = await api("POST", "/jobs/{job_id}/cancel", job_id=waiting["id"])
    assert code == 202 and cancelled["state"] == "cancelled"
    code, stopping = await api("POST", "/jobs/{job_id}/cancel", job_id=job_id)
    assert code == 202 and stopping["state"] in ("stopping", "cancelled")

    async def final():
        _, j = await api("GET", "/jobs/{job_id}", job_id=job_id)
        return j if j["state"] == "cancelled" else None

    await until(final, 30, "the running job to be cancelled")

    # What the real sidecar sent and got back, through the real heartbeat route.
    assert recorder.seen, "no heartbeat went through the recorder"
    states = set()
    for sent, status, answer in recorder.seen:
        validate(sent, "#/components/schemas/Heartbeat")
        validate(answer, response_pointer("/sidecar/{job_id}/heartbeat", "post", status))
        assert status == 200, answer
        states.add(sent["state"])
    api.called.add(("/sidecar/{job_id}/heartbeat", "post"))
    assert {"running", "cancelled"} <= states
    assert any(sent["progress"] for sent, _, _ in recorder.seen)

    # Every line the trainer wrote.
    lines = (Path(job["job_dir"]) / "progress.jsonl").read_text().splitlines()
    assert lines
    for line in lines:
        validate(json.loads(line), "#/components/schemas/ProgressRecord")

    # Keeping a job past the retention; the jobs a filter selects; a server's removed dirs.
    code, kept = await api("POST", "/jobs/{job_id}/keep", job_id=job_id, body={"kept": True})
    assert code == 200 and kept["kept"] is True
    code, _ = await api("POST", "/jobs/{job_id}/keep", job_id=job_id, body={"kept": 1})
    assert code == 400
    code, listed = await api("GET", "/jobs", params={"state": "cancelled", "all": "true"})
    assert code == 200 and {j["id"] for j in listed["jobs"]} == {
        job_id,
        waiting["id"],
        lease["job"]["id"],
    }
    code, _ = await api("GET", "/status", params={"since": "1e9", "state": "done"})
    assert code == 200
    code, forgotten = await api("POST", "/launches/removed", body={"jobs": ["j-1"]})
    assert (code, forgotten) == (200, {"jobs": ["j-1"]})

    # Fair share is for admins (the daemon's live test, test_fair_share_live, gets the 200s).
    code, _ = await api("GET", "/admin/shares")
    assert code == 403
    code, _ = await api("PUT", "/admin/groups/{group}/weight", group="staff", body={"weight": 2})
    assert code == 403

    assert api.called == documented(), documented() - api.called


def test_the_daemon_answers_match_the_document(tmp_path):
    """The daemon's own checks (401), another user's view, and launches waiting for an agent."""
    daemon = DaemonProcess(tmp_path, free_port())
    daemon.state.mkdir(parents=True)
    alice, bob = daemon.add_user("alice"), daemon.add_user("bob")
    daemon.start()
    try:

        def check(method, template, token, body=None, **ids):
            url = daemon.api_url + template.format(**ids).lstrip("/")
            code, payload = call(method, url, token, body)
            validate(payload, response_pointer(template, method.lower(), code))
            return code, payload

        assert check("GET", "/whoami", None)[0] == 401
        assert check("GET", "/jobs", "not-a-token")[0] == 401
        code, me = check("GET", "/whoami", alice)
        assert code == 200 and me["mode"] == "daemon"
        code, job = check("POST", "/jobs", alice, synthetic("alices", 1, 2))
        assert code == 201
        # Nobody carries the launch out: it stays listed for alice's server, secret included.
        launches = wait_for(
            lambda: check("GET", "/launches", alice)[1]["launches"], 20, what="the launch"
        )
        assert [item["job_id"] for item in launches] == [job["id"]]
        # Bob sees alice's job as owner, size and state only.
        _, jobs = check("GET", "/jobs", bob)
        assert set(jobs["jobs"][0]) == set(
            document()["components"]["schemas"]["PublicJob"]["required"]
        )
        _, queue = check("GET", "/queue", bob)
        assert queue["queue"][0]["name"] is None
        _, status = check("GET", "/status", bob)
        assert status["jobs"][0]["name"] is None
        assert check("GET", "/jobs/{job_id}", bob, job_id=job["id"])[0] == 403
        assert check("POST", "/jobs/{job_id}/cancel", bob, {}, job_id=job["id"])[0] == 403
    finally:
        daemon.stop()
