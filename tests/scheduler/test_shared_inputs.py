"""Passed variables in shared mode: the user's own server writes them into the job's
directory and forwards the submission without them; the shared scheduler takes none."""

from __future__ import annotations

import json
from pathlib import Path

from elastic_gpu_sidecar.protocol import INPUTS
from servers import call


def test_inputs_stay_with_the_users_server(daemon, user_server):
    d, tokens = daemon
    alice = user_server("alice")
    inputs = {"x_train": "A" * (12 * 2**20)}  # past the 8 MB the shared scheduler takes
    body = {
        "name": "with-inputs",
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 1,
        "synthetic": {"work": 50, "throughput": {"1": 100}, "batch": 10},
        "inputs": inputs,
    }
    code, job = call("POST", alice.api_url + "jobs", alice.token, body)
    assert code == 201, job
    written = Path(job["job_dir"]) / INPUTS
    assert json.loads(written.read_text()) == inputs
    # What the scheduler keeps of the job has no inputs in it.
    code, kept = call("GET", d.api_url + f"jobs/{job['id']}", tokens["alice"])
    assert code == 200 and "x_train" not in json.dumps(kept)
    # Sent to the scheduler itself, the same body is refused from its size, and a small one
    # with inputs for carrying them.
    code, doc = call("POST", d.api_url + "jobs", tokens["alice"], body)
    assert code == 413 and "passed variables" in doc["message"], doc
    small = {**body, "inputs": {"x": "gASVBAAAAAAAAABLAS4="}}
    code, doc = call("POST", d.api_url + "jobs", tokens["alice"], small)
    assert code == 400 and "takes no passed variables" in doc["message"], doc
