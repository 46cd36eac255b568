"""The shared scheduler's token-authenticated routes, fuzzed against a real daemon process.

Users alice and bob each have a finished job, and ops is an admin. Each example is one request
to a documented route with one of: a user's token (in the header or the query), a wrong,
malformed, doubled or missing one, a job id of the caller, of another user, or of nobody, bad
query arguments, and a hostile body. Accepted requests here never change anything (a valid
submission is left to the embedded server's fuzz, where the loop can be held still), so the
daemon stays idle and any change of its database or of its job list is a rejected request's.
"""

from __future__ import annotations

import json

from fuzzkit import (
    FUZZ_SETTINGS,
    Tally,
    check_answer,
    examples,
    job_path,
    operations,
    unchanged,
    would_wait,
)
from fuzzservers import VALID_SUBMITS
from hostile import BAD_JOB_IDS, bodies, query_args
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jupyter_elastic_gpu.errors import BadRequest
from jupyter_elastic_gpu.models import SubmitRequest, parse

#: (who, how the token travels); None: the credentials are no user's.
CREDENTIALS = [
    "alice", "alice", "bob", "bob", "ops", "alice-query", "none", "empty", "wrong", "scheme-only",
    "bearer", "double", "junk-after", "long", "cookie", "alice-and-wrong-query",
]  # fmt: skip


def credentials(kind: str, tokens: dict[str, str]) -> tuple[dict, list, bool]:
    """(headers, query, whether they name a user)."""
    alice = tokens["alice"]
    if kind in tokens:
        return {"Authorization": f"token {tokens[kind]}"}, [], True
    return {
        "alice-query": ({}, [("token", alice)], True),
        "none": ({}, [], False),
        "empty": ({"Authorization": ""}, [], False),
        "wrong": ({"Authorization": "token not-a-token"}, [], False),
        "scheme-only": ({"Authorization": "token"}, [], False),
        "bearer": ({"Authorization": f"Bearer {alice}"}, [], True),
        "double": ({"Authorization": f"token {alice}, token {alice}"}, [], False),
        "junk-after": ({"Authorization": f"token {alice} junk"}, [], False),
        "long": ({"Authorization": "token " + "t" * 40_000}, [], False),
        "cookie": ({"Cookie": "_xsrf=x; username-127-0-0-1=x"}, [], False),
        "alice-and-wrong-query": ({"Authorization": f"token {alice}"}, [("token", "nope")], False),
    }[kind]


def is_valid_submission(body: bytes) -> bool:
    try:
        parse(SubmitRequest, json.loads(body), "job")
    except (ValueError, RecursionError, BadRequest):
        return False
    return True


def fuzz_shared_scheduler(daemon, n: int) -> Tally:
    ids = list(daemon.jobs.values())
    version = daemon.api("GET", "updates?since=-1&timeout=0", "alice")[1]["version"]
    tally = Tally("routes (shared scheduler)")

    @settings(max_examples=n, **FUZZ_SETTINGS)
    @given(
        op=st.sampled_from(operations()),
        job_id=st.one_of(st.sampled_from(ids), st.sampled_from(BAD_JOB_IDS)),
        who=st.sampled_from(CREDENTIALS),
        query=query_args,
        body=st.one_of(st.none(), bodies(VALID_SUBMITS)),
    )
    def one_request(op, job_id, who, query, body):
        method, template = op
        headers, auth_query, named = credentials(who, daemon.tokens)
        if method == "POST" and body is None:
            body = b"{}"
        if template == "/jobs" and method == "POST" and named:
            assume(not is_valid_submission(body))
        query = auth_query + query
        if template == "/updates" and would_wait(query, version):
            query.append(("timeout", "0"))
        route = f"{method} {template}"
        before = daemon.fingerprint()
        answer = daemon.client.send(method, job_path(template, job_id), body, headers, query)
        check_answer(tally, route, answer, template, method)
        if answer.status >= 400:
            unchanged(
                tally,
                route,
                before,
                daemon.fingerprint(),
                f"{who} {job_id!r} {query} {body!r:.300}",
            )
        elif not named:
            tally.problem(route, f"accepted credentials that name no user: {who}")

    try:
        one_request()
    finally:
        tally.write()
    return tally


def test_the_shared_scheduler_refuses_bad_credentials_and_input(fuzz_daemon):
    tally = fuzz_shared_scheduler(fuzz_daemon, examples(600))
    assert sum(c["4xx"] for c in tally.counts.values()) > 0
    assert {f"{m} {t}" for m, t in operations()} <= set(tally.counts)
