"""The route table (``scheduler/port/routes.py``) against everything that follows it: the
server's handlers, the relaying ``RemoteBackend`` and the REST client all say each route as
the table does, and every ``Backend`` operation has its route."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import unquote, urlsplit

import pytest

from jupyter_elastic_gpu.notebook.client import SchedulerClient
from jupyter_elastic_gpu.scheduler.port.backend import OPERATIONS
from jupyter_elastic_gpu.scheduler.port.remote import RemoteBackend
from jupyter_elastic_gpu.scheduler.port.routes import (
    PATH_PARAMETERS,
    ROUTE_TABLE,
    ROUTES_BY_NAME,
    SOCKET_PATH,
    paths,
    route,
)
from jupyter_elastic_gpu.scheduler.principal import Principal
from jupyter_elastic_gpu.server import handlers

METHODS = ("get", "head", "post", "put", "patch", "delete", "options")


def own_methods(handler: type) -> set[str]:
    found = set()
    for method in METHODS:
        owner = next((c for c in handler.__mro__ if method in vars(c)), None)
        if owner is not None and owner.__module__.startswith("jupyter_elastic_gpu"):
            found.add(method.upper())
    return found


def test_every_operation_has_one_route_and_each_route_is_one_operation():
    assert set(OPERATIONS) <= set(ROUTES_BY_NAME)
    assert len(ROUTES_BY_NAME) == len(ROUTE_TABLE)
    assert len({(r.method, r.path) for r in ROUTE_TABLE}) == len(ROUTE_TABLE)
    for r in ROUTE_TABLE:
        assert set(r.parameters) <= set(PATH_PARAMETERS), r.name
        assert r.method in ("GET", "POST", "PUT"), r.name
        assert r.response is not None and r.status in (200, 201, 202), r.name
        assert (r.request is None) or r.method != "GET", r.name
        assert r.errors == tuple(sorted(set(r.errors))), r.name
        assert set(r.notes) <= set(r.errors), r.name


def test_the_server_serves_each_path_of_the_table_with_one_handler_of_its_methods():
    assert set(handlers.HANDLERS) == set(ROUTES_BY_NAME)
    served = dict(handlers.ROUTES)
    assert set(served) == {same[0].pattern() for same in paths().values()} | {SOCKET_PATH}
    for same in paths().values():
        handler = {handlers.HANDLERS[r.name] for r in same}
        assert len(handler) == 1, same[0].path
        assert served[same[0].pattern()] in handler
        assert own_methods(handler.pop()) == {r.method for r in same}, same[0].path


def test_each_pattern_matches_its_path_and_names_its_parameters():
    for r in ROUTE_TABLE:
        values = {name: "x1" for name in r.parameters}
        match = re.fullmatch(r.pattern(), r.url(**values))
        assert match and match.groupdict() == values, r.name


#: A body each operation accepts (for those that check one before relaying it).
BODIES = {
    "submit": {"kind": "synthetic", "synthetic": {"work": 10, "throughput": {"1": 5}}},
    "removed": {"jobs": ["j-1"]},
    "keep": {"kept": True},
    "set_group_weight": {"weight": 2},
    "set_priority": {"priority": 2},
    "drain": {"drained": True},
    "open_lease": {"gpus": 1},
    "cancel": {"force": True},
}
#: What each operation of ``RemoteBackend`` asks the shared scheduler for, when not itself:
#: the logs are read here, from the directory of the job the scheduler answers.
RELAYED_AS = {"logs": "job"}


class Sent(Exception):
    pass


class Recorder:
    """Stands in for the HTTP client: records each request and answers none."""

    def __init__(self) -> None:
        self.requests: list = []

    async def fetch(self, request):
        self.requests.append(request)
        raise Sent


def arguments(name: str) -> dict:
    from jupyter_elastic_gpu.scheduler.port.backend import signature

    values = {"job_id": "j-1", "gpu_id": "0:1", "group": "a b/c", "tail": 5, "since": 1.0}
    values |= {"timeout": 0.0, "secret": "s", "body": BODIES.get(name, {})}
    params = signature(name).parameters
    args = {k: v for k, v in values.items() if k in params}
    if "who" in params:
        args["who"] = Principal("ann")
    return args


@pytest.mark.parametrize("name", sorted(set(OPERATIONS) - {"heartbeat"}))
def test_the_remote_backend_asks_the_route_of_each_operation(name):
    remote = RemoteBackend("http://scheduler.test/elastic-gpu/api/", "t0k")
    remote.client = Recorder()
    with pytest.raises(Sent):
        asyncio.run(getattr(remote, name)(**arguments(name)))
    (request,) = remote.client.requests
    expected = route(RELAYED_AS.get(name, name))
    path = urlsplit(request.url).path.removeprefix("/elastic-gpu/api/")
    params = {k: v for k, v in arguments(name).items() if k in expected.parameters}
    assert (request.method, path) == (expected.method, expected.url(**params))
    assert unquote(path) == expected.path.format(**params)


#: The client's methods, with arguments, for each route it calls.
CLIENT_CALLS = {
    "whoami": (),
    "gpus": (),
    "jobs": ({"all": "true"},),
    "submit": (BODIES["submit"],),
    "job": ("j-1",),
    "cancel": ("j-1", True),
    "suspend": ("j-1",),
    "resume": ("j-1",),
    "keep": ("j-1",),
    "events": ("j-1",),
    "progress": ("j-1", 3.0),
    "queue": (),
    "status": (),
    "launches": (),
    "open_lease": ({"gpus": 1},),
    "lease_kernel": ("k-1", 1, 5.0),
    "set_priority": ("j-1", 2.0),
    "drain": ("0:1",),
    "shares": (),
    "set_group_weight": ("a b", 2.0),
}
#: Parameters of the client's methods as the routes name them.
CLIENT_PARAMETERS = {"j-1": "job_id", "0:1": "gpu_id", "a b": "group", "k-1": "kernel_id"}


@pytest.mark.parametrize("name", sorted(CLIENT_CALLS))
def test_the_client_asks_the_route_of_each_method(name, monkeypatch):
    client = SchedulerClient("http://scheduler.test/", "t0k")
    sent = []
    monkeypatch.setattr(client, "_request", lambda *args, **kw: sent.append(args) or {})
    getattr(client, name)(*CLIENT_CALLS[name])
    expected = route(name)
    named = [a for a in CLIENT_CALLS[name] if isinstance(a, str) and a in CLIENT_PARAMETERS]
    params = {CLIENT_PARAMETERS[a]: a for a in named}
    (args,) = sent
    assert args[:2] == (expected.method, expected.url(**params))


def test_the_client_calls_every_route_people_call():
    public = {n for n in dir(SchedulerClient) if not n.startswith("_")}
    # (logs and long polls have their own tests; a sidecar's heartbeat is the sidecar's)
    assert set(ROUTES_BY_NAME) - {"heartbeat", "removed"} <= public
    assert set(CLIENT_CALLS) | {"logs", "wait_updates"} == set(ROUTES_BY_NAME) & public
