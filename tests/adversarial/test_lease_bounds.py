"""No kernel lease holds GPUs for good: bounded while others wait, capped per user, and cut
off when its provisioner ignores the release.

The attacker here is a provisioner of the attacker's own making: a process that opens a GPU
lease through the API and heartbeats with its secret, always saying its kernel is busy
(``idle_s: 0``) and never giving the GPUs back. Before these bounds it kept all four GPUs
while the job waiting for them waited for ever.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time

import pytest
from servers import DaemonProcess, HolderBeats, call, free_port, get_json, wait_for

from jupyter_elastic_gpu.scheduler.releases import RELEASE_TIMEOUT

pytestmark = pytest.mark.slow

WAIT_S = 90.0
#: The short bounds of these tests (the defaults are hours and a minute or more).
FAST = {
    "InteractiveLeases.hold_limit_contended": 2.0,
    "InteractiveLeases.idle_warning": 1.0,
    "SchedulerService.release_grace": 3.0,
}


def synthetic(name: str, gpus: int) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": gpus,
        "max_gpus": gpus,
        "synthetic": {"work": 1e9, "throughput": {"1": 100, "2": 190, "4": 350}},
    }


class HostileProvisioner(HolderBeats):
    """Holds a lease: heartbeats 'running, busy' with whatever GPUs it was given, whatever
    the answer says. ``poll``: also polls ``GET launches`` as its user's server would (a
    shared scheduler admits only users whose server is there)."""

    def __init__(self, api: str, token: str, gpus: int, poll: bool = False) -> None:
        code, lease = call("POST", api + "leases", token, {"gpus": gpus, "name": "hog"})
        assert code == 201, lease
        super().__init__(lease["heartbeat_url"], lease["secret"])
        self.api, self.token, self.poll = api, token, poll
        self.id = lease["job"]["id"]
        self.gpus: list[str] = []
        self.generation = 0

    def body(self) -> dict:
        claim = {"job_id": self.id, "state": "running", "idle_s": 0}
        if self.gpus:
            claim.update(gpus=self.gpus, generation=self.generation)
        return claim

    def answered(self, answer: dict) -> None:
        if answer.get("gpus") and not self.gpus:  # take them, and never give them back
            self.gpus, self.generation = answer["gpus"], answer["generation"]
        if self.poll:
            get_json(self.api + "launches", self.token)


def job(api: str, token: str, job_id: str) -> dict:
    return get_json(f"{api}jobs/{job_id}", token)


def test_a_lease_past_its_limit_whose_provisioner_ignores_the_release_is_cut_off(
    server_process,
):
    server = server_process(port=free_port(), config=FAST)
    api, token = server.api_url, server.token
    with HostileProvisioner(api, token, 4) as hog:
        wait_for(lambda: job(api, token, hog.id)["state"] == "running", WAIT_S, what="the lease")
        _, waiting = call("POST", api + "jobs", token, synthetic("waits", 2))
        asked = time.monotonic()
        started = wait_for(
            lambda: (j := job(api, token, waiting["id"]))["state"] == "running" and j,
            WAIT_S,
            what="the waiting job to get GPUs",
        )
        took = time.monotonic() - asked
        ended = job(api, token, hog.id)
        assert ended["state"] == "failed" and ended["error"]["type"] == RELEASE_TIMEOUT
        assert "give its lease back" in ended["error"]["message"]
        wait_for(lambda: hog.statuses[-1] == 401, 30, what="the lease's secret to be refused")
    kinds = [e["kind"] for e in get_json(f"{api}jobs/{hog.id}/events", token)["events"]]
    assert kinds.index("cancel") < kinds.index("deadline") < kinds.index("failed")
    assert set(started["gpus"]) <= set(hog.gpus)
    # Hold limit (2 s) + grace (3 s) + decisions: printed for docs/security.md's figure.
    print(f"time to GPUs past a hostile lease: {took:.1f} s")


@pytest.fixture
def shared(tmp_path):
    """A shared scheduler (4 simulated GPUs) with alice, bob and ops (admin); ``start(*args)``
    starts it with these settings."""
    started = []

    def start(*args: str) -> tuple[DaemonProcess, dict[str, str]]:
        d = DaemonProcess(tmp_path, free_port(), extra=list(args))
        d.state.mkdir(parents=True)
        tokens = {u: d.add_user(u, admin=u == "ops") for u in ("alice", "bob", "ops")}
        d.start()
        started.append(d)
        return d, tokens

    yield start
    for d in started:
        d.stop()


def test_one_users_kernels_hold_at_most_half_a_shared_schedulers_gpus(shared):
    d, tokens = shared()
    api = d.api_url
    code, answer = call("POST", api + "leases", tokens["alice"], {"gpus": 3})
    assert code == 409 and "c.InteractiveLeases.user_gpu_cap" in answer["message"]
    code, _ = call("POST", api + "leases", tokens["alice"], {"gpus": 2})
    assert code == 201
    code, answer = call("POST", api + "leases", tokens["alice"], {"gpus": 1})
    assert code == 409 and "hold or wait for 2 GPUs" in answer["message"]
    code, _ = call("POST", api + "leases", tokens["bob"], {"gpus": 2})  # another user's own
    assert code == 201


def test_a_lease_above_its_owners_fair_share_is_reclaimed_for_another_user(shared):
    args = [f"--{k}={v}" for k, v in FAST.items() if "hold_limit" not in k]
    d, tokens = shared(*args, "--InteractiveLeases.user_gpu_cap=0")
    api = d.api_url
    with HostileProvisioner(api, tokens["alice"], 4, poll=True) as hog:
        wait_for(
            lambda: job(api, tokens["alice"], hog.id)["state"] == "running",
            WAIT_S,
            what="alice's lease on all four GPUs",
        )
        _, bobs = call("POST", api + "jobs", tokens["bob"], synthetic("bobs", 2))
        stop = threading.Event()

        def bobs_server():  # bob's server is there: his jobs may be given GPUs
            while not stop.wait(0.5):
                with contextlib.suppress(OSError):
                    get_json(api + "launches", tokens["bob"])

        poller = threading.Thread(target=bobs_server, daemon=True)
        poller.start()
        try:
            given = wait_for(
                lambda: (j := job(api, tokens["bob"], bobs["id"]))["gpus"] and j,
                WAIT_S,
                what="bob's job to be given GPUs",
            )
        finally:
            stop.set()
            poller.join()
        assert len(given["gpus"]) == 2
        ended = job(api, tokens["alice"], hog.id)
        assert ended["state"] == "failed" and ended["error"]["type"] == RELEASE_TIMEOUT
    events = get_json(f"{api}jobs/{hog.id}/events", tokens["alice"])["events"]
    released = next(e for e in events if e["kind"] == "cancel")
    assert "more than their fair share while 1 other user waits" in released["message"]


LIAR = '''
from jupyter_elastic_gpu.kernels.provisioner import ElasticGPUProvisioner


class LiarProvisioner(ElasticGPUProvisioner):
    """Says its kernel is always busy."""

    def idle_s(self):
        return 0.0
'''


def test_the_server_judges_a_kernels_idleness_whatever_its_provisioner_says(
    server_process, tmp_path
):
    """A provisioner any installed package can add reports ``idle_s: 0`` for ever: the
    server that runs the kernel sees it run nothing and reclaims its lease all the same."""
    from servers import leased_kernel_env

    from jupyter_elastic_gpu.kernels.specs import kernel_json

    site = tmp_path / "site"
    (site / "liarprov-1.0.dist-info").mkdir(parents=True)
    (site / "liarprov.py").write_text(LIAR)
    (site / "liarprov-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: liarprov\nVersion: 1.0\n"
    )
    (site / "liarprov-1.0.dist-info" / "entry_points.txt").write_text(
        "[jupyter_client.kernel_provisioners]\nliar-provisioner = liarprov:LiarProvisioner\n"
    )
    env = leased_kernel_env(tmp_path / "jupyter-data", (2,))
    spec = kernel_json(2, admission_timeout=20)
    spec["metadata"]["kernel_provisioner"]["provisioner_name"] = "liar-provisioner"
    folder = tmp_path / "jupyter-data" / "kernels" / "python3-liar"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps(spec))
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    config = {
        "InteractiveLeases.idle_timeout": 600.0,
        "InteractiveLeases.idle_timeout_contended": 4.0,
        "InteractiveLeases.idle_warning": 2.0,
    }
    server = server_process(port=free_port(), env=env, config=config)
    code, kernel = call("POST", server.url + "api/kernels", server.token, {"name": "python3-liar"})
    assert code == 201, kernel
    api, token = server.api_url, server.token

    def lease():
        leases = [j for j in get_json(api + "jobs", token)["jobs"] if j["kind"] == "interactive"]
        return leases[0] if leases and leases[0]["state"] == "running" else None

    held = wait_for(lease, WAIT_S, what="the kernel's lease")
    _, waiting = call("POST", api + "jobs", token, synthetic("waits", 4))
    wait_for(
        lambda: job(api, token, waiting["id"])["state"] == "running",
        WAIT_S,
        what="the idle kernel's GPUs to go to the waiting job",
    )
    ended = job(api, token, held["id"])
    assert ended["reason"].startswith("released: its kernel has run nothing"), ended["reason"]
