"""A sidecar that ended leaves no defunct child behind in the Jupyter server that started it,
even when nothing asks about its job any more (it is over)."""

from __future__ import annotations

from hubkit import synthetic
from procfs import children
from servers import call, free_port, get_json, wait_for

JOBS = 4


def test_finished_sidecars_leave_no_defunct_children(server_process):
    server = server_process(port=free_port())
    ids = []
    for i in range(JOBS):
        code, job = call("POST", server.api_url + "jobs", server.token, synthetic(f"s{i}", 50))
        assert code == 201, job
        ids.append(job["id"])

    def over() -> bool:
        states = {get_json(f"{server.api_url}jobs/{i}", server.token)["state"] for i in ids}
        assert states <= {"queued", "starting", "running", "done"}, states
        return states == {"done"}

    wait_for(over, 120, what=f"{JOBS} short jobs to finish")

    def left() -> list:
        # A sidecar lingers a moment after its job is done; then nothing of it may be left.
        return [
            c for c in children(server.proc.pid) if c.defunct or "elastic_gpu_sidecar" in c.argv
        ]

    try:
        wait_for(lambda: not left(), 30, what="the sidecars to end and be waited for")
    except TimeoutError:
        raise AssertionError(f"left by {JOBS} finished jobs in the server: {left()}") from None
