"""Every documented route of the embedded scheduler, fuzzed through a real server.

Each example is one request: a documented operation, a job id (the server's own jobs, ids
that do not exist, ids no route accepts), credentials of every kind (right, wrong, missing,
malformed), bad query arguments, and a body (a valid request with fields broken, any JSON,
no JSON at all). Every answer must be below 500, strict JSON, valid under the document, and
a rejected request must leave the scheduler exactly as it was (``fuzzkit``).
"""

from __future__ import annotations

import asyncio

from fuzzkit import (
    FUZZ_SETTINGS,
    Tally,
    check_answer,
    examples,
    job_path,
    jupyter_auth,
    operations,
    unchanged,
    would_wait,
)
from fuzzservers import VALID_SUBMITS, synthetic
from hostile import AUTH_KINDS, BAD_JOB_IDS, bodies, query_args
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_elastic_gpu.models import SubmitRequest


def fuzz_every_route(server, n: int) -> Tally:
    jobs = server.start_jobs(2)
    server.pause()
    code, cancelled = server.api("POST", "jobs", synthetic("to-cancel"))
    assert code == 201
    assert server.api("POST", f"jobs/{cancelled['id']}/cancel")[1]["state"] == "cancelled"
    server.keep_baseline()
    ids = [j["id"] for j in jobs] + [cancelled["id"]]
    version = server.service.version
    tally = Tally("routes (embedded server)")

    @settings(max_examples=n, **FUZZ_SETTINGS)
    @given(
        op=st.sampled_from(operations()),
        job_id=st.one_of(st.sampled_from(ids), st.sampled_from(BAD_JOB_IDS), st.text(max_size=70)),
        auth=st.sampled_from(AUTH_KINDS),
        query=query_args,
        body=st.one_of(st.none(), bodies(VALID_SUBMITS, model=SubmitRequest)),
    )
    def one_request(op, job_id, auth, query, body):
        method, template = op
        headers, auth_query = jupyter_auth(auth, server.token)
        query = auth_query + query
        if template == "/updates" and would_wait(query, version):
            query.append(("timeout", "0"))
        if method == "POST" and body is None:
            body = b"{}"
        route = f"{method} {template}"
        before = server.fingerprint()
        answer = server.client.send(method, job_path(template, job_id), body, headers, query)
        payload = check_answer(tally, route, answer, template, method)
        if answer.status >= 400:
            unchanged(
                tally,
                route,
                before,
                server.fingerprint(),
                f"{job_id!r} {auth} {query} {body!r:.300}",
            )
        elif route == "POST /jobs" and isinstance(payload, dict):
            server.api("POST", f"jobs/{payload['id']}/cancel")  # accepted: out of the way
        elif route == "POST /jobs/{job_id}/cancel" and job_id in server.baseline:
            server.restore(job_id)

    try:
        one_request()
    finally:
        tally.write()
    return tally


async def test_every_route_refuses_bad_input_without_changing_anything(fuzz_server):
    tally = await asyncio.to_thread(fuzz_every_route, fuzz_server, examples(1000))
    routes = {f"{m} {t}" for m, t in operations()}
    assert routes <= set(tally.counts), routes - set(tally.counts)
    total = sum(c["sent"] for c in tally.counts.values())
    assert sum(c["4xx"] for c in tally.counts.values()) > total // 3  # it did reach validation
