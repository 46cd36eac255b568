"""MIG slices leased to kernels: a shared scheduler on a simulated box with an H100 in MIG mode
(two 1g.10gb instances, one 3g.40gb) and a T4. Two users' kernels each get their own slice and
see only it; a third lease waits saying for what; a profile there is none of is refused with
the ones there are; jobs on whole GPUs never touch the MIG GPU; and when the layout changes
under a lease, the kernel is restarted without the slice it lost, saying why."""

from __future__ import annotations

import json
import urllib.request

import pytest
from servers import DaemonProcess, call, free_port, get_json

from jupyter_elastic_gpu.kernels import ENV_CUDA, NO_GPU

pytestmark = pytest.mark.slow

LAYOUT = "H100-80GB[2x1g.10gb,3g.40gb],T4"
SPEC = "python3-mig-1g.10gb"
SYNTHETIC = {
    "kind": "synthetic",
    "name": "trainer",
    "synthetic": {"work": 1e9, "throughput": {"1": 1000, "2": 1900}},
}


def beat(grant: dict) -> dict:
    """One heartbeat of a lease asked straight from the API (as a provisioner beats)."""
    request = urllib.request.Request(
        grant["heartbeat_url"],
        data=json.dumps({"job_id": grant["job"]["id"]}).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {grant['secret']}"},
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


def given_back(daemon, server, token: str, lease: dict, kernel) -> dict:
    """``lease`` once it has ended and its kernel has restarted without the slice."""

    def released():
        job = get_json(daemon.api_url + f"jobs/{lease['id']}", token)
        return job if job["state"] in ("done", "cancelled", "failed") else None

    ended = server.until(released, timeout=90, what="the lease to be given back")
    assert server.until(
        lambda: server.env_after_restart(kernel, ENV_CUDA) == NO_GPU,
        what="the kernel restarted without the slice",
    )
    return ended


@pytest.fixture
def mig_daemon(tmp_path):
    daemon = DaemonProcess(tmp_path, free_port(), extra=["--simulated-gpus", LAYOUT])
    daemon.start()
    yield daemon
    daemon.stop()


def test_two_users_kernels_get_a_slice_each_and_jobs_never_the_mig_gpu(mig_daemon, lab):
    daemon = mig_daemon
    tokens = {u: daemon.add_user(u) for u in ("alice", "bob")}
    admin = daemon.add_user("root-admin", admin=True)
    servers = {
        u: lab(config={"scheduler_url": daemon.api_url, "scheduler_token": t}, name=u)
        for u, t in tokens.items()
    }

    def leases() -> dict[str, dict]:
        jobs = get_json(daemon.api_url + "jobs", admin)["jobs"]
        return {j["id"]: j for j in jobs if j["kind"] == "interactive"}

    # a kernel of the MIG spec starts once its lease holds a slice: each user's its own
    kernels = {u: s.start_kernel(SPEC) for u, s in servers.items()}
    held = {j["user"]: j for j in leases().values() if j["state"] == "running"}
    assert set(held) == {"alice", "bob"}
    assert {j["mig"] for j in held.values()} == {"1g.10gb"}
    slices = {u: j["gpus"] for u, j in held.items()}
    assert all(len(g) == 1 and g[0].startswith("MIG-") for g in slices.values())
    assert slices["alice"] != slices["bob"]
    assert held["alice"]["reason"] == "holds a 1g.10gb MIG slice for its notebook kernel"
    for user, server in servers.items():
        assert server.env(kernels[user], ENV_CUDA) == slices[user][0]  # only its slice

    # the sidebar's GPUs: slices under their GPU, each with who holds it
    gpus = get_json(daemon.api_url + "gpus", tokens["alice"])["gpus"]
    assert [(g["id"], g["kind"]) for g in gpus] == [("0", "H100-80GB"), ("1", "T4")]
    by_uuid = {s["uuid"]: s for s in gpus[0]["mig"]}
    assert by_uuid[slices["alice"][0]]["holder_user"] == "alice"
    assert by_uuid[slices["alice"][0]]["holder_name"] == held["alice"]["name"]
    assert by_uuid[slices["bob"][0]]["holder_user"] == "bob"
    assert by_uuid[slices["bob"][0]]["holder_name"] is None  # another user's: not named
    assert gpus[0]["holder"] is None  # the GPU itself is nobody's
    status = get_json(daemon.api_url + "status", tokens["alice"])["gpus"]  # the CLI's status
    assert {s["uuid"]: s["holder"] for s in status[0]["mig"]} == {
        slices["alice"][0]: held["alice"]["id"],
        slices["bob"][0]: held["bob"]["id"],
        next(u for u in by_uuid if by_uuid[u]["profile"] == "3g.40gb"): None,
    }

    # a third 1g.10gb lease waits, saying for what
    status, third = call("POST", daemon.api_url + "leases", tokens["alice"], {"mig": "1g.10gb"})
    assert status == 201, third

    def third_says():
        beat(third)  # kept alive as its provisioner would
        job = leases()[third["job"]["id"]]
        return job if job["reason_kind"] == "mig_slice" else None

    waiting = servers["alice"].until(third_says, what="the third lease's reason")
    assert waiting["state"] == "queued" and waiting["gpus"] == []
    assert waiting["reason"] == "queued: needs a 1g.10gb MIG slice: 2 here, all held"

    # a profile there is none of: refused, with the ones there are; nothing is queued for it
    before = set(leases())
    status, refused = call("POST", daemon.api_url + "leases", tokens["bob"], {"mig": "2g.20gb"})
    assert status == 400, refused
    assert (
        "no 2g.20gb MIG slice on this server; its MIG slices are: 2 1g.10gb, 1 3g.40gb"
        in (refused["message"])
    )
    status, refused = call("POST", daemon.api_url + "leases", tokens["bob"], {"mig": "big"})
    assert status == 400 and "is not a MIG profile" in refused["message"], refused
    assert set(leases()) == before

    # a job on whole GPUs: the T4 only (the H100 serves its instances)
    status, job = call("POST", daemon.api_url + "jobs", tokens["bob"], {**SYNTHETIC, "max_gpus": 2})
    assert status == 201, job
    assert job["max_gpus"] == 1

    def started():
        beat(third)
        j = get_json(daemon.api_url + f"jobs/{job['id']}", tokens["bob"])
        return j if j["state"] in ("starting", "running") else None

    assert servers["bob"].until(started, what="the job to start")["gpus"] == ["1"]

    # bob's kernel shuts down: its slice goes to the lease waiting for one
    servers["bob"].shutdown_kernel(kernels["bob"])

    def third_holds():
        answer = beat(third)
        return answer["gpus"] or None

    assert servers["bob"].until(third_holds, what="the slice to pass on") == slices["bob"]


def test_a_lease_whose_slice_leaves_the_layout_is_released_with_why(mig_daemon, lab):
    daemon = mig_daemon
    token = daemon.add_user("alice")
    server = lab(config={"scheduler_url": daemon.api_url, "scheduler_token": token}, name="alice")
    kernel = server.start_kernel(SPEC)
    (lease,) = get_json(daemon.api_url + "jobs", token)["jobs"]
    assert lease["state"] == "running"
    assert server.env(kernel, ENV_CUDA) == lease["gpus"][0]

    # a single-device job on the 3g.40gb instance
    body = {**SYNTHETIC, "mig": "3g.40gb", "synthetic": {"work": 1e9, "throughput": {"1": 100}}}
    status, job = call("POST", daemon.api_url + "jobs", token, body)
    assert status == 201, job
    assert (job["min_gpus"], job["max_gpus"], job["mig"]) == (1, 1, "3g.40gb")

    def job_view():
        return get_json(daemon.api_url + f"jobs/{job['id']}", token)

    def running(on=None):
        j = job_view()
        ok = j["state"] == "running" and j["gpus"] and j["gpus"] != on
        return j if ok and j["progress"] and j["reason_kind"] == "running" else None

    first = server.until(running, timeout=90, what="the job to run on its slice")
    gpus = get_json(daemon.api_url + "gpus", token)["gpus"]
    (big,) = [s["uuid"] for s in gpus[0]["mig"] if s["profile"] == "3g.40gb"]
    assert first["gpus"] == [big]
    assert first["reason"] == "running on a 3g.40gb MIG slice"

    # an admin re-partitions the H100 (the scheduler never does): the instance is gone
    daemon.stop()
    daemon.extra = ["--simulated-gpus", "H100-80GB[3g.40gb],T4"]
    daemon.start()

    ended = given_back(daemon, server, token, lease, kernel)
    assert ended["state"] == "done", ended
    assert ended["reason"] == (
        f"released: its 1g.10gb MIG slice {lease['gpus'][0]} is gone (the GPU's MIG layout "
        "changed); ask for a slice again (%gpu_lease 1g.10gb)"
    )

    # the job's instance is gone too: it checkpointed, queued again and resumed on the other
    # 3g.40gb instance, from where it was
    moved = server.until(lambda: running(on=[big]), timeout=120, what="the job to resume")
    assert moved["gpus"] == ["MIG-simulated-0-0"]
    held = [c["gpus"] for c in moved["history"]]
    assert held[0] == [big] and held[-1] == ["MIG-simulated-0-0"] and [] in held, held
    assert moved["progress"]["samples"] >= first["progress"]["samples"]


def test_a_lease_on_a_gpu_an_admin_drains_is_released_and_no_slice_of_it_handed_out(
    mig_daemon, lab
):
    daemon = mig_daemon
    token = daemon.add_user("alice")
    admin = daemon.add_user("root-admin", admin=True)
    server = lab(config={"scheduler_url": daemon.api_url, "scheduler_token": token}, name="alice")
    kernel = server.start_kernel(SPEC)
    (lease,) = get_json(daemon.api_url + "jobs", token)["jobs"]
    assert lease["state"] == "running" and lease["gpus"][0].startswith("MIG-")

    status, body = call("POST", daemon.api_url + "gpus/0/drain", admin, {"drained": True})
    assert status == 200, body

    ended = given_back(daemon, server, token, lease, kernel)
    assert ended["reason"] == (
        f"released: its 1g.10gb MIG slice {lease['gpus'][0]} is on GPU 0, which an admin "
        "drained for maintenance; ask for a slice again (%gpu_lease 1g.10gb)"
    )
    # a new ask waits, saying why, until the GPU is back in service
    status, grant = call("POST", daemon.api_url + "leases", token, {"mig": "1g.10gb"})
    assert status == 201, grant
    says = (
        "queued: needs a 1g.10gb MIG slice: none in service now (2 on a GPU drained for "
        "maintenance)"
    )

    def decided():
        beat(grant)  # kept alive as its provisioner would
        job = get_json(daemon.api_url + f"jobs/{grant['job']['id']}", token)
        assert job["state"] == "queued", job
        return job if job["reason"] != "queued: waiting for the first decision" else None

    assert server.until(decided, timeout=60, what="a decision on the lease")["reason"] == says
    status, body = call("POST", daemon.api_url + "gpus/0/drain", admin, {"drained": False})
    assert status == 200, body

    def granted():
        beat(grant)
        job = get_json(daemon.api_url + f"jobs/{grant['job']['id']}", token)
        return job if job["state"] in ("starting", "running") and job["gpus"] else None

    back = server.until(granted, timeout=60, what="the lease to get a slice again")
    assert back["gpus"][0].startswith("MIG-")


def test_gpu_lease_magic_gives_a_running_kernel_a_slice_or_says_which_there_are(lab):
    server = lab(config={"simulated_gpus": LAYOUT})
    kernel = server.start_kernel("python3")
    assert server.env(kernel, ENV_CUDA) == NO_GPU
    refused = server.run(
        kernel,
        "%load_ext jupyter_elastic_gpu\n"
        "try:\n    %gpu_lease 2g.20gb --yes\nexcept Exception as e:\n    print('refused:', e)",
    )
    assert "refused: no 2g.20gb MIG slice on this server; its MIG slices are: 2 1g.10gb" in refused
    assert server.leases() == []  # nothing asked for, nothing held

    out = server.run(kernel, "%gpu_lease 1G.10GB --yes")
    assert "restarting the kernel with a 1g.10gb MIG slice (MIG-simulated-0-" in out, out
    (lease,) = server.leases()
    assert lease["mig"] == "1g.10gb" and lease["gpus"][0].startswith("MIG-simulated-0-")
    assert server.until(
        lambda: server.env_after_restart(kernel, ENV_CUDA) == lease["gpus"][0],
        what="the restarted kernel to see its slice",
    )
    running = server.until(lambda: server.leases()[0]["state"] == "running", what="running")
    assert running
