"""The sidecar heartbeat, fuzzed with a valid secret and hostile contents.

Five jobs of a real server, each with the secret its launcher handed to its (recording)
sidecar: one running, one stopping, one queued again after a suspension, one done, one
starting whose sidecar never reported. Each example posts one heartbeat to one of them (or to
a job that does not exist) with credentials of some kind and a body built from a valid
heartbeat with fields broken, or from any JSON, or from no JSON. A rejected heartbeat must
change nothing at all; an accepted one must leave every view of the job valid JSON under the
document, and the policy able to decide on what it let in. Each accepted heartbeat's job is
put back as it was, so that every example meets the same five states.
"""

from __future__ import annotations

import asyncio

from fuzzkit import (
    FUZZ_SETTINGS,
    HEARTBEAT,
    VIEWS,
    Tally,
    check_answer,
    examples,
    job_path,
    jupyter_auth,
    unchanged,
)
from fuzzservers import five_states, valid_heartbeats
from hostile import BAD_JOB_IDS, bodies
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_elastic_gpu.models import Heartbeat

#: Credentials a sidecar could send: (kind, weight by repetition).
SIDECAR_AUTH = ["own"] * 40 + [
    "other-job", "none", "empty", "scheme-only", "basic", "lower", "padded", "long",
    "jupyter", "double",
]  # fmt: skip


def sidecar_auth(kind: str, own: str, other: str, token: str) -> dict[str, str]:
    return {
        "own": {"Authorization": f"Bearer {own}"},
        "other-job": {"Authorization": f"Bearer {other}"},
        "none": {},
        "empty": {"Authorization": ""},
        "scheme-only": {"Authorization": "Bearer "},
        "basic": {"Authorization": f"Basic {own}"},
        "lower": {"Authorization": f"bearer {own}"},
        "padded": {"Authorization": f"Bearer   {own}  "},
        "long": {"Authorization": "Bearer " + "s" * 40_000},
        "jupyter": jupyter_auth("valid", token)[0],
        "double": {"Authorization": f"Bearer {own} {own}"},
    }[kind]


def fuzz_heartbeats(server, n: int) -> Tally:
    jobs = five_states(server)
    nobody = {"id": "j-0000000000", "secret": "x", "generation": 1, "gpus": ["0"]}
    targets = [*jobs, nobody]
    tally = Tally("heartbeat (embedded server)")
    route = f"POST {HEARTBEAT}"

    @settings(max_examples=n, **FUZZ_SETTINGS)
    @given(
        target=st.sampled_from(targets),
        other=st.sampled_from(jobs),
        auth=st.sampled_from(SIDECAR_AUTH),
        data=st.data(),
    )
    def one_heartbeat(target, other, auth, data):
        body = data.draw(bodies(valid_heartbeats(target), 4, Heartbeat), label="body")
        bad_path = data.draw(st.integers(0, 9), label="bad path") == 0
        job_id = data.draw(st.sampled_from(BAD_JOB_IDS)) if bad_path else target["id"]
        headers = sidecar_auth(auth, target["secret"], other["secret"], server.token)
        before = server.fingerprint()
        answer = server.client.send("POST", job_path(HEARTBEAT, job_id), body, headers)
        check_answer(tally, route, answer, HEARTBEAT, "post")
        if answer.status >= 400:
            unchanged(tally, route, before, server.fingerprint(), f"{job_id} {auth} {body!r:.500}")
            return
        for method, template in VIEWS:  # what it let in reaches every view, as valid JSON
            view = server.client.send(
                method, job_path(template, job_id), None, jupyter_auth("valid", server.token)[0]
            )
            check_answer(tally, f"{method} {template}", view, template, method)
            if view.status != 200:
                tally.problem(f"{method} {template}", f"answered {view.status} after {body!r:.300}")
        try:
            server.decide_now()
        except Exception as e:  # the policy must take whatever the model let in
            tally.problem(route, f"the decision failed ({e!r}) after {body!r:.300}")
        if job_id in server.baseline:
            server.restore(job_id)

    try:
        one_heartbeat()
    finally:
        tally.write()
    return tally


async def test_heartbeats_with_a_valid_secret_and_hostile_contents(fuzz_server):
    tally = await asyncio.to_thread(fuzz_heartbeats, fuzz_server, examples(800))
    counts = tally.counts[f"POST {HEARTBEAT}"]
    assert counts["2xx"] > 20 and counts["4xx"] > counts["sent"] // 3, dict(counts)
