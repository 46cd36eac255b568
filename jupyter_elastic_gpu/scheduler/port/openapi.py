"""The OpenAPI document of the API, made from the route table (``routes.py``) and the models.

Paths, operations, parameters, bodies and answers come from ``ROUTE_TABLE``; the schemas from
the pydantic models (``model_json_schema``: what the server validates is what the document
says); the words from the routes and the models' docstrings and field descriptions. What is
here is what no route or model holds: the API's overview, the errors' meanings, the
credentials. ``generate.py`` writes the document to ``server/openapi.yaml``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ...models import ErrorBody
from ...models.push import UpdateMessage
from .backend import Access
from .routes import API_PREFIX, PATH_PARAMETERS, ROUTE_TABLE, SOCKET_PATH, Route, paths

SCHEMAS = "#/components/schemas/"

OVERVIEW = """\
The REST API of the scheduler, served by the Jupyter server extension (the embedded
scheduler, or a user's server proxying to a shared scheduler) and by the shared
`jupyter elastic-gpu scheduler`, which is the same extension run standalone: one set of
handlers (`jupyter_elastic_gpu/server/handlers.py`) and one set of models
(`jupyter_elastic_gpu/models/`). This document is generated from the route table
(`jupyter_elastic_gpu/scheduler/port/routes.py`) and those models (`make generate`);
`tests/scheduler/test_openapi.py` validates real responses against it.

A user sees and changes only their own jobs in full; other users' jobs appear only as
owner, size and state (`PublicJob`). Admins see and change everything. A rejected request
changes nothing. Errors are JSON (`ErrorBody`: `message`, `reason`).

On a user's server in shared mode, a route the daemon cannot be reached for answers 503
(`reason: unavailable`), and an error status of the daemon is passed on with its message.

When the scheduler's database cannot be written (locked past its busy timeout, read-only,
failing, damaged, or held by another scheduler) a route that writes or reads it answers
503 (`reason: storage-unavailable`), and 507 (`reason: storage-full`) when its disk is
full: the message says what to do, nothing was changed, and the scheduler carries on by
itself once the fault is gone. Every route answers 503 while the scheduler could not start
(a damaged database, one held by another scheduler): the message says why.
"""

TAGS = {
    "jobs": "Submit, inspect and cancel jobs.",
    "cluster": "GPUs, the queue and change notifications.",
    "sidecar": "The sidecar protocol (docs/sidecar.md) and shared-mode launches.",
    "admin": "Suspend and resume jobs (owners and admins); priorities and drained GPUs (admins).",
}

#: Each error status: its name among the document's responses, and what it means anywhere.
ERRORS: dict[int, tuple[str, str]] = {
    400: (
        "BadRequest",
        "The request is malformed (invalid JSON, a field out of range, an unknown field); the "
        "message says what was wrong.",
    ),
    401: (
        "Unauthorized",
        "No valid credentials: on a Jupyter server no token or login (whatever "
        "`ServerApp.allow_unauthenticated_access` says), on the daemon no valid per-user token "
        "(`Authorization: token <t>`). `tests/scheduler/test_auth.py` checks every route and "
        "method.",
    ),
    403: (
        "Forbidden",
        "The job belongs to another user and the caller is no admin (or Jupyter's own checks "
        "refused the request, e.g. its host or its XSRF token).",
    ),
    404: (
        "NotFound",
        "No job with this id (or, for any path under the API root that is no route, no such "
        "route).",
    ),
    409: (
        "Conflict",
        "The job is finished (nothing to suspend, its priority no longer matters) or being "
        "cancelled (`reason: conflict`); nothing was changed.",
    ),
    413: (
        "TooLarge",
        "The body is larger than the route takes (`reason: too-large`), refused from its "
        "Content-Length before it is read (a chunked one where it passes the limit): `POST "
        "jobs` 256 MB on a user's own server (passed variables travel in it) and 8 MB on the "
        "shared scheduler and the Hub service (which take none); the heartbeat and "
        "`launches/removed` 1 MB; the routes of a few fields (priority, drain, keep, a group's "
        "weight, leases) 64 kB; every other route (every GET; cancel, suspend, resume) 4 kB.",
    ),
    429: (
        "TooManyJobs",
        "The caller has as many open (queued or running) jobs as one user may (`reason: "
        "too-many-jobs`, `c.SchedulerService.max_open_jobs`, admins included); nothing was "
        "changed: wait until some finish, or cancel some.",
    ),
    503: (
        "Unavailable",
        "The scheduler cannot answer now: it did not start, or its database cannot be used "
        "(`reason: storage-unavailable`: locked, read-only, failing, damaged, held by another "
        "scheduler); nothing was changed, the message says why and what to do.",
    ),
    507: (
        "StorageFull",
        "The disk holding the scheduler's database is full (`reason: storage-full`); nothing "
        "was changed, and the scheduler carries on by itself once there is room.",
    ),
}

SECURITY_SCHEMES = {
    "jupyterToken": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Authorization: token <t>`. On a Jupyter server: its token (or, in a "
        "browser, the login cookie with the `_xsrf` check on POST); under JupyterHub the hub's "
        "OAuth token, the user being the hub user. On the daemon: a per-user token from its "
        "token file (`jupyter elastic-gpu scheduler add-user NAME [--admin]`).",
    },
    "jupyterTokenQuery": {
        "type": "apiKey",
        "in": "query",
        "name": "token",
        "description": "The same token as a query argument (`?token=<t>`).",
    },
    "sidecarSecret": {
        "type": "http",
        "scheme": "bearer",
        "description": "`Authorization: Bearer <secret>`: the per-job secret the launcher hands "
        "the sidecar in `ELASTIC_GPU_JOB_SECRET` (never on a command line). The scheduler "
        "keeps only its hash.",
    },
}

SOCKET = {
    "summary": "WebSocket: the status document, or the JupyterLab panel's GPUs, queue and "
    "jobs, pushed on every change.",
    "description": """\
Not an HTTP operation (OpenAPI cannot describe WebSockets): open `ws(s)://…/ws` with the
same credentials as the other routes (Jupyter token or login cookie; Jupyter server
only, the daemon has no WebSocket). Without credentials the upgrade is refused with 401
and a JSON `ErrorBody`; an unknown `view` with 400. The server sends text frames holding
one `UpdateMessage` each (`#/components/schemas/UpdateMessage`). Messages from the client
are ignored. On an error it sends `{"type": "error", "message": …, "reason": …}` and
closes.

`?view=status` (the default): first the current status at once, then
`{"type": "update", "version": N, "status": Status}` after every change of
state (at least every 25 s).

`?view=panel` (the JupyterLab panel): first `PanelSnapshot`, the documents `GET gpus`,
`GET queue` and `GET jobs` answer this caller; then, after changes (at most 4 a
second), `PanelDelta` with only what changed: `gpus` whole when that document changed
(utilisation moves by itself: looked at every 5 s), and for `queue` and `jobs` a
`ListDelta` by id. A client applies a `ListDelta` to its list in this order: drop the
entries whose id is in `removed`; replace each entry of `changed` it has (same id) in
place and append the others in the order given; then, when `order` is there, put the
entries in that order (it lists every id, and is sent only when the first two steps
would not give it). `version` is the scheduler's state version the documents are at
least as new as (the one `GET updates` answers).

Clients that cannot use a WebSocket long-poll `GET updates` and then the routes.
""",
}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def models() -> list[type[BaseModel]]:
    """Every model the document describes: each route's body and answer, the error and the
    websocket's message."""
    found: list[type[BaseModel]] = [ErrorBody, UpdateMessage]
    for r in ROUTE_TABLE:
        for model in (r.request, r.response):
            if model is not None and model not in found:
                found.append(model)
    return found


def _clean(schema: Any) -> Any:
    """A pydantic schema without the titles it gives every field (the name says it), its
    descriptions in Markdown."""
    if isinstance(schema, list):
        return [_clean(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: _clean(v) for name, v in value.items()}
        elif key == "description" and isinstance(value, str):
            out[key] = value.replace(
                "``", "`"
            )  # (docstrings quote as reST, the document as Markdown)
        else:
            out[key] = _clean(value)
    return out


def schemas() -> dict[str, Any]:
    """The models' JSON schemas by name, their references pointing at each other here."""
    _, top = models_json_schema(
        [(model, "validation") for model in models()], ref_template=SCHEMAS + "{model}"
    )
    found = _clean(top["$defs"])
    return dict(sorted(found.items()))


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema: one left out is None, so it is never null itself."""
    options = [s for s in schema.get("anyOf", ()) if s != {"type": "null"}]
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "description", "default")}
    if "default" in schema and schema["default"] is not None:
        rest["default"] = schema["default"]
    if len(options) == 1:
        return {**options[0], **rest}
    return {**({"anyOf": options} if options else {}), **rest}


def query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    """The query string ``model`` reads, one parameter per field (a list: comma-separated)."""
    spec = _clean(model.model_json_schema(ref_template=SCHEMAS + "{model}"))
    out = []
    for name, prop in spec["properties"].items():
        param: dict[str, Any] = {"name": name, "in": "query"}
        if "description" in prop:
            param["description"] = prop["description"]
        param["schema"] = _not_null(prop)
        if param["schema"].get("type") == "array":
            param |= {"style": "form", "explode": False}
        out.append(param)
    return out


def _path_parameters() -> dict[str, Any]:
    out = {}
    for name, p in PATH_PARAMETERS.items():
        schema: dict[str, Any] = {"type": "string"}
        if p.checked:
            schema["pattern"] = f"^{p.pattern}$"
        else:
            schema["minLength"] = 1
        out[_camel(name)] = {
            "name": name,
            "in": "path",
            "required": True,
            "description": p.description,
            "schema": schema,
        }
    return out


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": SCHEMAS + model.__name__}


def operation(r: Route) -> dict[str, Any]:
    """The OpenAPI operation of route ``r``."""
    assert r.response is not None  # (every route has one: Route checks)
    op: dict[str, Any] = {"tags": [r.tag], "operationId": r.name, "summary": r.summary}
    if r.description:
        op["description"] = r.description
    if r.query is not None:
        op["parameters"] = query_parameters(r.query)
    if r.access is Access.SECRET:
        op["security"] = [{"sidecarSecret": []}]
    if r.request is not None:
        op["requestBody"] = {"required": not r.body_optional, "content": _json(_ref(r.request))}
    responses: dict[str, Any] = {
        str(r.status): {"description": r.answer, "content": _json(_ref(r.response))}
    }
    for status in r.errors:
        if status in r.notes:
            responses[str(status)] = {
                "description": r.notes[status],
                "content": _json(_ref(ErrorBody)),
            }
        else:
            responses[str(status)] = {"$ref": f"#/components/responses/{ERRORS[status][0]}"}
    op["responses"] = responses
    return op


def document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document."""
    out_paths: dict[str, Any] = {}
    for path, same in paths().items():
        item: dict[str, Any] = {}
        names = same[0].parameters
        if names:
            item["parameters"] = [{"$ref": f"#/components/parameters/{_camel(n)}"} for n in names]
        for r in same:
            item[r.method.lower()] = operation(r)
        out_paths["/" + path] = item
    out_paths["/" + SOCKET_PATH] = dict(SOCKET)
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "jupyter-elastic-gpu scheduler API",
            "version": "1",
            "summary": "Submit, follow and cancel elastic GPU training jobs; the sidecar "
            "heartbeat.",
            "description": OVERVIEW,
            "license": {"name": "BSD-3-Clause"},
        },
        "servers": [
            {
                "url": "{origin}{base_url}" + API_PREFIX,
                "description": "A Jupyter server with the extension (embedded, or a shared-mode "
                "client), or the shared `jupyter elastic-gpu scheduler` (by default at "
                "http://127.0.0.1:9111/, base_url `/`).",
                "variables": {
                    "origin": {
                        "default": "http://127.0.0.1:8888",
                        "description": "Scheme, host and port of the server.",
                    },
                    "base_url": {
                        "default": "/",
                        "description": "`ServerApp.base_url` (e.g. `/user/ann/` under "
                        "JupyterHub); starts and ends with `/`.",
                    },
                },
            }
        ],
        "security": [{"jupyterToken": []}, {"jupyterTokenQuery": []}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": out_paths,
        "components": {
            "securitySchemes": SECURITY_SCHEMES,
            "parameters": _path_parameters(),
            "responses": {
                name: {"description": text, "content": _json(_ref(ErrorBody))}
                for name, text in ERRORS.values()
            },
            "schemas": schemas(),
        },
    }
