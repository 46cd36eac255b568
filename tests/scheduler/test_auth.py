"""Every handler authenticated, in the style of the JupyterLab extension template's check:
each route of ``server/handlers.py`` ``ROUTES``, with every HTTP method its handler defines,
asked without credentials on a real server process, answers 401 with a JSON message."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from servers import JupyterServerProcess, free_port, kill_sidecars_under

from jupyter_elastic_gpu.server.handlers import ROUTES, HeartbeatHandler

#: Every method a tornado handler may define.
METHODS = ("get", "head", "post", "put", "patch", "delete", "options")
GROUP = re.compile(r"\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)")


def own_methods(handler: type) -> list[str]:
    """The HTTP methods this project's code defines on ``handler`` (tornado's own answer 405)."""
    found = []
    for method in METHODS:
        owner = next((c for c in handler.__mro__ if method in vars(c)), None)
        if owner is not None and owner.__module__.startswith("jupyter_elastic_gpu"):
            found.append(method.upper())
    return found


CASES = [
    (GROUP.sub("j-x", route), handler, method)
    for route, handler in ROUTES
    for method in own_methods(handler)
]


def test_every_route_defines_a_method():
    assert {handler for _, handler, _ in CASES} == {handler for _, handler in ROUTES}


def ask(url: str, method: str, headers: dict[str, str]) -> tuple[int, dict]:
    body = b"{}" if method in ("POST", "PUT", "PATCH") else None
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=15) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"not json": raw.decode(errors="replace")[:300]}


@pytest.fixture(scope="module", params=["default", "no unauthenticated access"])
def server(request, tmp_path_factory):
    """A real server, as installed and with Jupyter's strictest setting."""
    root = tmp_path_factory.mktemp("auth")
    strict = ["--ServerApp.allow_unauthenticated_access=False"]
    extra = strict if request.param != "default" else []
    proc = JupyterServerProcess(root=root, port=free_port(), extra_args=extra)
    proc.start()
    yield proc
    proc.stop()
    kill_sidecars_under(root)


@pytest.mark.parametrize(
    ("route", "handler", "method"), CASES, ids=[f"{m} {r}" for r, _, m in CASES]
)
@pytest.mark.parametrize("credentials", ["none", "wrong token"])
def test_no_credentials_get_401_with_a_json_message(server, route, handler, method, credentials):
    headers = {"Content-Type": "application/json"}
    if credentials == "wrong token":
        headers["Authorization"] = "token not-the-token"
    code, payload = ask(server.api_url + route, method, headers)
    assert code == 401, (method, route, code, payload)
    assert isinstance(payload, dict) and payload.get("message"), payload
    if handler is HeartbeatHandler:  # sidecars have their own scheme
        assert "Bearer" in payload["message"]


def test_the_websocket_upgrade_needs_credentials_too(server):
    headers = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    code, payload = ask(server.api_url + "ws", "GET", headers)
    assert code == 401 and payload.get("message"), (code, payload)
