"""The adversarial suite's harness: raw HTTP against a real server, what every answer must be,
and a fingerprint of the server's state to prove that a rejected request changed nothing.

Requests go over a real socket with ``http.client``, so that any bytes, headers and paths can
be sent. Every answer must be below 500, strict JSON (no NaN or Infinity token), a 4xx must
carry a ``message``, and an answer of a documented route must be valid under the schema
``openapi.yaml`` declares for its status. A rejected request (4xx) must leave the fingerprint
as it was: the job records (in memory, where the test can see them, and in the database), the
event log, the progress rows, and the state version that wakes watchers.

``Tally`` counts every case per route; with ``$ELASTIC_GPU_FUZZ_REPORT`` set (the figures of
benchmarks/fuzz_audit.py) each test appends its counts to that file, and a broken rule is
counted and listed there instead of stopping the run.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from hypothesis import HealthCheck
from openapi_check import document, validate_answer

#: Examples per fuzz test: the suite's default, or what the audit asks for.
EXAMPLES_ENV = "ELASTIC_GPU_FUZZ_EXAMPLES"
#: A file each fuzz test appends its counts to (the audit): broken rules are counted there.
REPORT_ENV = "ELASTIC_GPU_FUZZ_REPORT"

#: How every fuzz test runs hypothesis: the same cases on every run, no example database.
FUZZ_SETTINGS = dict(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

HEARTBEAT = "/sidecar/{job_id}/heartbeat"
#: Where what a heartbeat let in shows: each must stay 200 and valid under the document.
VIEWS = [
    ("GET", "/jobs"),
    ("GET", "/jobs/{job_id}"),
    ("GET", "/status"),
    ("GET", "/queue"),
    ("GET", "/jobs/{job_id}/events"),
    ("GET", "/jobs/{job_id}/progress"),
]


def examples(default: int) -> int:
    return int(os.environ.get(EXAMPLES_ENV) or default)


def _no_constants(token: str) -> Any:
    raise ValueError(f"the answer holds the non-JSON token {token}")


def strict_json(raw: bytes) -> Any:
    """The answer as JSON, refusing NaN, Infinity and -Infinity (json.loads accepts them)."""
    return json.loads(raw, parse_constant=_no_constants)


@dataclass
class Answer:
    status: int
    raw: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return strict_json(self.raw)


class Client:
    """Raw HTTP/1.1 to one server; ``prefix`` is the API root's path (``/.../elastic-gpu/api/``)."""

    def __init__(self, host: str, port: int, prefix: str, timeout: float = 60.0) -> None:
        self.host, self.port, self.prefix, self.timeout = host, port, prefix, timeout

    def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        query: list[tuple[str, str]] | None = None,
    ) -> Answer:
        """``path`` under the API root, sent as is (quote what needs quoting)."""
        target = self.prefix + path
        if query:
            target += "?" + urlencode(query, quote_via=quote, errors="surrogatepass")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.putrequest(method, target, skip_accept_encoding=True)
            sent = {"Content-Type": "application/json", **(headers or {})}
            if body is not None:
                sent["Content-Length"] = str(len(body))
            for name, value in sent.items():
                conn.putheader(name, value.encode("latin-1", "replace"))
            conn.endheaders(body)
            r = conn.getresponse()
            return Answer(r.status, r.read(), {k.lower(): v for k, v in r.getheaders()})
        finally:
            conn.close()


def job_path(template: str, job_id: str) -> str:
    """A documented path with ``job_id`` percent-encoded into it (relative to the API root)."""
    return template.lstrip("/").replace("{job_id}", quote(job_id, safe="", errors="surrogatepass"))


def operations() -> list[tuple[str, str]]:
    """(METHOD, template) of every documented operation, in document order."""
    return [
        (method.upper(), template)
        for template, item in document()["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    ]


@dataclass
class Tally:
    """Cases per route: sent, by status class, and the rules broken."""

    name: str
    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    problems: list[str] = field(default_factory=list)

    @property
    def strict(self) -> bool:
        return not os.environ.get(REPORT_ENV)

    def count(self, route: str, status: int) -> None:
        c = self.counts[route]
        c["sent"] += 1
        c[f"{status // 100}xx"] += 1

    def problem(self, route: str, what: str, kind: str | None = "invalid") -> None:
        """A broken rule: fails the test, or (audit) is counted under ``kind`` (None: counted
        already, as a 5xx) and listed."""
        if kind is not None:
            self.counts[route][kind] += 1
        text = f"{route}: {what}"
        if self.strict:
            raise AssertionError(text)
        if len(self.problems) < 200:
            self.problems.append(text[:2000])

    def write(self) -> None:
        path = os.environ.get(REPORT_ENV)
        if not path:
            return
        doc = {
            "test": self.name,
            "routes": {r: dict(c) for r, c in self.counts.items()},
            "problems": self.problems,
        }
        with open(path, "a") as f:
            f.write(json.dumps(doc) + "\n")


def check_answer(
    tally: Tally, route: str, answer: Answer, template: str | None = None, method: str = ""
) -> Any:
    """Count ``answer`` and hold it to the rules; returns its JSON (None if it has none)."""
    tally.count(route, answer.status)
    if answer.status >= 500:
        tally.problem(route, f"answered {answer.status}: {answer.raw[:500]!r}", None)
    try:
        payload = answer.json()
    except ValueError as e:
        tally.problem(
            route, f"answered {answer.status} that is not strict JSON ({e}): {answer.raw[:300]!r}"
        )
        return None
    is_error = isinstance(payload, dict) and isinstance(payload.get("message"), str)
    if answer.status >= 400 and not is_error:
        tally.problem(route, f"error {answer.status} without a message: {payload!r:.300}")
    if template is not None:
        try:
            validate_answer(payload, template, method, answer.status)
        except AssertionError as e:
            tally.problem(route, str(e))
    return payload


def unchanged(tally: Tally, route: str, before: Any, after: Any, request: str) -> None:
    """A rejected request must leave the state as it found it."""
    if before != after:
        tally.problem(route, f"a rejected request changed the state: {request:.500}", "changed")


# -- fingerprints -----------------------------------------------------------------------------


async def service_fingerprint(service: Any) -> tuple:
    """Everything a request could change in an in-process scheduler: each job record in
    memory, the state version, secrets waiting to be handed out, and the database."""
    memory = json.dumps({k: j.to_dict() for k, j in service.jobs.items()}, sort_keys=True)
    rows = []
    db = service.store.db
    for query in (
        "SELECT id, user, state, submitted_at, finished_at, data FROM jobs ORDER BY id",
        "SELECT count(*), max(seq) FROM events",
        "SELECT count(*), max(rowid) FROM progress",
    ):
        async with db.execute(query) as cur:
            rows.append([tuple(r) async for r in cur])
    return memory, service.version, sorted(service._secrets), rows


def database_fingerprint(db_path: str) -> list:
    """The database of a scheduler in another process, read-only."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        return [
            conn.execute(
                "SELECT id, user, state, finished_at, data FROM jobs ORDER BY id"
            ).fetchall(),
            conn.execute("SELECT count(*), max(seq) FROM events").fetchall(),
            conn.execute("SELECT count(*), max(rowid) FROM progress").fetchall(),
        ]
    finally:
        conn.close()


# -- credentials ------------------------------------------------------------------------------


def jupyter_auth(kind: str, token: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(headers, query args) for one kind of credentials of ``hostile.AUTH_KINDS``."""
    return {
        "valid": ({"Authorization": f"token {token}"}, []),
        "none": ({}, []),
        "empty": ({"Authorization": ""}, []),
        "wrong": ({"Authorization": "token not-the-token"}, []),
        "scheme-only": ({"Authorization": "token"}, []),
        "bearer": ({"Authorization": f"Bearer {token}"}, []),
        "upper-scheme": ({"Authorization": f"TOKEN {token}"}, []),
        "query": ({}, [("token", token)]),
        "wrong-query": ({"Authorization": f"token {token}"}, [("token", "nope")]),
        "double": ({"Authorization": f"token {token}, token {token}"}, []),
        "junk-after": ({"Authorization": f"token {token} junk"}, []),
        "cookie": ({"Cookie": "username-127-0-0-1=garbage; _xsrf=x"}, []),
        "long": ({"Authorization": "token " + "t" * 40_000}, []),
    }[kind]


def would_wait(query: list[tuple[str, str]], version: int) -> bool:
    """Whether ``GET updates`` with ``query`` is a valid long poll that would wait (the state
    version stays put while the suite runs): what the handler does with the arguments."""

    def last(name: str, default: float) -> float | None:
        values = [v for k, v in query if k == name]
        if not values:
            return default
        text = re.sub(r"[\x00-\x08\x0e-\x1f]", " ", values[-1]).strip()  # as tornado reads it
        try:
            value = float(text)
        except ValueError:
            return None
        return value if value == value and abs(value) != float("inf") else None

    since, timeout = last("since", 0), last("timeout", 25.0)
    if since is None or timeout is None:
        return False  # refused at once
    return int(min(max(since, -1), 2**62)) >= version and min(max(timeout, 0.0), 60.0) > 0.2
