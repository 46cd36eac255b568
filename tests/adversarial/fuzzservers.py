"""The real servers the adversarial suite attacks, and the valid requests it starts from.

* ``InProcess``: the pytest-jupyter server with the embedded scheduler, in the test's own
  process (so that a test can fingerprint the scheduler's memory), on 8 simulated GPUs. Its
  launcher runs a recording stand-in for the sidecar's Python (``RECORDER``): it keeps the
  secret the launcher hands over (exactly what a real sidecar gets, in its environment) and
  stays alive, so the test can heartbeat as the sidecar with a known secret through the real
  route.
* ``Daemon``: a real `jupyter elastic-gpu scheduler` process with per-user tokens.

Both are driven from a worker thread (``asyncio.to_thread``) while the server's event loop
serves the requests: hypothesis runs its examples synchronously there.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from fuzzkit import Client, database_fingerprint, jupyter_auth, service_fingerprint
from servers import DaemonProcess, call, wait_for

from jupyter_elastic_gpu.scheduler.jobs import JobRecord

RECORDER = """#!{python}
# Stands in for the sidecar's Python: records the secret and arguments the launcher hands a
# sidecar, then stays alive (the scheduler sees a live sidecar) until its server is gone.
import json, os, sys, time
args = sys.argv[1:]
job_id = args[args.index("--job-id") + 1]
record = {{"secret": os.environ["ELASTIC_GPU_JOB_SECRET"], "args": args}}
tmp = os.path.join({folder!r}, "." + job_id + ".tmp")
with open(tmp, "w") as f:
    json.dump(record, f)
os.replace(tmp, os.path.join({folder!r}, job_id + ".json"))
parent, deadline = os.getppid(), time.monotonic() + 900
while os.getppid() == parent and time.monotonic() < deadline:
    time.sleep(0.5)
"""


def synthetic(name: str = "fuzz", min_gpus: int = 1, max_gpus: int = 1) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": min_gpus,
        "max_gpus": max_gpus,
        "synthetic": {"work": 1e9, "throughput": {"1": 100, "2": 190}, "batch": 10},
    }


class InProcess:
    """The in-process server, driven from a worker thread."""

    def __init__(self, serverapp: Any, port: int, base_url: str, loop: Any, launches: Path):
        self.client = Client("127.0.0.1", port, f"{base_url}elastic-gpu/api/")
        self.token = serverapp.identity_provider.token
        self.app = next(iter(serverapp.extension_manager.extension_apps["jupyter_elastic_gpu"]))
        self.loop, self.launches = loop, launches
        self.baseline: dict[str, str] = {}  # job id -> its record as JSON, to restore

    def on_loop(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(120)

    @property
    def service(self) -> Any:
        return self.app._service

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A well-formed request with the server's token."""
        headers, _ = jupyter_auth("valid", self.token)
        data = None if body is None else json.dumps(body).encode()
        answer = self.client.send(method, path, data, headers)
        return answer.status, answer.json()

    def fingerprint(self) -> Any:
        return self.on_loop(service_fingerprint(self.service))

    def secret(self, job_id: str) -> dict | None:
        path = self.launches / f"{job_id}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def heartbeat(self, job_id: str, secret: str, body: dict) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {secret}"}
        answer = self.client.send(
            "POST", f"sidecar/{job_id}/heartbeat", json.dumps(body).encode(), headers
        )
        return answer.status, answer.json()

    def start_jobs(self, count: int, confirm: bool = True) -> list[dict]:
        """Submit ``count`` one-GPU jobs, wait until each sidecar is launched, and (``confirm``)
        confirm each as running with a real heartbeat. Returns {id, secret, generation, gpus}
        per job."""
        ids = []
        for i in range(count):
            code, job = self.api("POST", "jobs", synthetic(f"fuzz-{i}"))
            assert code == 201, job
            ids.append(job["id"])
        records = wait_for(
            lambda: all(self.secret(i) for i in ids) and [self.secret(i) for i in ids],
            60,
            what="every job's sidecar to be launched",
        )
        jobs = []
        for job_id, rec in zip(ids, records):
            args = rec["args"]
            generation = int(args[args.index("--generation") + 1])
            gpus = args[args.index("--gpus") + 1].split(",")
            jobs.append(
                {"id": job_id, "secret": rec["secret"], "generation": generation, "gpus": gpus}
            )
        for job in jobs if confirm else ():
            beat = {"job_id": job["id"], "generation": job["generation"], "gpus": job["gpus"]}
            code, grant = self.heartbeat(job["id"], job["secret"], {**beat, "state": "running"})
            assert code == 200, grant
            assert self.api("GET", f"jobs/{job['id']}")[1]["state"] == "running"
        return jobs

    def pause(self) -> None:
        """Stop the scheduler's own loop: from here on only requests change the state (and the
        test can compare fingerprints without racing a decision)."""
        self.on_loop(self.service.stop())

    def keep_baseline(self) -> None:
        self.baseline = {k: json.dumps(j.to_dict()) for k, j in self.service.jobs.items()}

    def restore(self, job_id: str) -> None:
        """Put a baseline job back as it was (in memory and in the database)."""

        async def put_back() -> None:
            job = JobRecord.from_dict(json.loads(self.baseline[job_id]))
            self.service.jobs[job_id] = job
            await self.service.lifecycle.save(job)

        self.on_loop(put_back())

    def decide_now(self) -> Any:
        """One decision on the current state, without acting on it: hostile data a request
        let in must not break the policy."""
        from jupyter_elastic_gpu.core.schedule import decide
        from jupyter_elastic_gpu.scheduler import snapshot

        async def one() -> Any:
            s = self.service
            open_jobs = [j for j in s.jobs.values() if not j.final]
            snap = snapshot.build(
                open_jobs, s.gpu_infos(), s.external(), s.default_resize_cost, s.user_gpu_cap
            )
            return decide(s.decider, snap, time.time())

        return self.on_loop(one())


class Daemon:
    """A shared scheduler process with users alice and bob and the admin ops."""

    def __init__(self, proc: DaemonProcess, tokens: dict[str, str]) -> None:
        self.proc, self.tokens = proc, tokens
        self.client = Client("127.0.0.1", proc.port, "/elastic-gpu/api/")
        self.db_path = str(proc.state / "scheduler.sqlite")
        self.jobs: dict[str, str] = {}  # user -> id of their (finished) job

    def api(self, method: str, path: str, user: str, body: Any = None) -> tuple[int, Any]:
        return call(method, self.proc.api_url + path, self.tokens[user], body)

    def fingerprint(self) -> Any:
        _, jobs = self.api("GET", "jobs", "ops")
        return database_fingerprint(self.db_path), jobs

    def finish(self, user: str, job_id: str) -> None:
        """Cancel a job and see it through to ``cancelled``, as its sidecar would."""

        def final() -> bool:
            _, job = self.api("GET", f"jobs/{job_id}", user)
            if job["state"] in ("done", "failed", "cancelled"):
                return True
            if job["state"] != "stopping":
                self.api("POST", f"jobs/{job_id}/cancel", user, {})
            for launch in self.api("GET", "launches", user)[1]["launches"]:
                if launch["job_id"] == job_id and job["state"] == "stopping":
                    beat = json.dumps({"state": "cancelled", "generation": launch["generation"]})
                    headers = {"Authorization": f"Bearer {launch['secret']}"}
                    self.client.send("POST", f"sidecar/{job_id}/heartbeat", beat.encode(), headers)
            return False

        wait_for(final, 60, what=f"job {job_id} to end")


#: Valid submissions the fuzzer breaks: every field of the body is set in one of them.
VALID_SUBMITS = [
    {
        "name": "fuzzed",
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 2,
        "requested_gpus": 1,
        "epochs": 3,
        "priority": 1.0,
        "batch_policy": "keep-global",
        "simulated": True,
        "cwd": "/tmp",
        "args": ["--lr", "0.1"],
        "inputs": {"x_train": "gASVAAAAAAAAAAA="},
        "synthetic": {
            "work": 1000,
            "throughput": {"1": 100, "2": 190},
            "time_scale": 1.0,
            "batch": 32,
        },
    },
    {
        "kind": "script",
        "script": "print('hello')\n",
        "min_gpus": 1,
        "max_gpus": 8,
        "framework": "keras",
    },
]


def valid_heartbeats(job: dict) -> list[dict]:
    """What a sidecar of ``job`` could send, in each state, with every field set."""
    progress = {
        "t": 1_700_000_000.5, "generation": job["generation"], "replicas": 1, "epoch": 1,
        "epochs": 3, "step_in_epoch": 4, "steps_per_epoch": 10, "global_step": 14,
        "samples": 140.0, "loss": 0.5, "metrics": {"accuracy": 0.75, "auc": None},
        "samples_per_s": 90.0, "batch_size": 10, "first": False, "pid": 4242,
        "resumed_from": 10, "replayed": 0, "epoch_end": False, "stopped": False,
    }  # fmt: skip
    base = {
        "job_id": job["id"],
        "generation": job["generation"],
        "gpus": job["gpus"],
        "state": "running",
        "progress": progress,
        "backlog": [{**progress, "t": progress["t"] - 1, "global_step": 13, "samples": 130.0}],
        "throughput": {"1": 90.0},
        "resize_cost_s": 1.5,
        "sidecar_pid": 4240,
        "trainer_pid": 4242,
        "restarts": 0,
        "error": {"type": "ValueError", "message": "m", "traceback": "tb", "hint": "h"},
        "exit_code": None,
        "model_path": None,
    }
    return [{**base, "state": s} for s in ("running", "resizing", "suspended", "done", "failed")]


def five_states(server: InProcess) -> list[dict]:
    """Five jobs with known secrets, in five states, reached through the real routes."""
    jobs = server.start_jobs(4)
    jobs.append(server.start_jobs(1, confirm=False)[0])
    server.pause()
    _, stopping, suspended, done, _ = jobs  # running, ..., starting
    assert server.api("POST", f"jobs/{stopping['id']}/cancel")[1]["state"] == "stopping"
    for job, state in ((suspended, "suspended"), (done, "done")):
        beat = {"generation": job["generation"], "gpus": [], "state": state}
        assert server.heartbeat(job["id"], job["secret"], beat)[0] == 200
    states = {j["id"]: server.api("GET", f"jobs/{j['id']}")[1]["state"] for j in jobs}
    assert list(states.values()) == ["running", "stopping", "queued", "done", "starting"]
    server.keep_baseline()
    return jobs


def write_recorder(folder: Path) -> Path:
    """The recording stand-in for the sidecar's Python, keeping launches in ``folder/launches``."""
    launches = folder / "launches"
    launches.mkdir()
    recorder = folder / "sidecar-recorder"
    recorder.write_text(RECORDER.format(python=sys.executable, folder=str(launches)))
    recorder.chmod(0o755)
    return recorder
