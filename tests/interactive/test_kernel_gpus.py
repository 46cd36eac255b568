"""Kernels see no GPU unless they hold a lease; a leased kernel sees exactly its GPUs."""

from __future__ import annotations

from jupyter_elastic_gpu.kernels import ENV_CUDA, ENV_LEASE, ENV_TF_GROWTH, NO_GPU


def test_plain_kernel_sees_no_gpu_and_a_leased_one_exactly_its_own(lab):
    server = lab()
    plain = server.start_kernel("python3")
    assert server.env(plain, ENV_CUDA) == NO_GPU
    assert server.leases() == []

    leased = server.start_kernel("python3-gpu2")
    (lease,) = server.leases()
    assert lease["state"] == "running" and len(lease["gpus"]) == 2
    assert server.env(leased, ENV_CUDA) == ",".join(lease["gpus"])
    assert server.env(leased, ENV_TF_GROWTH) == "true"
    assert server.env(leased, ENV_LEASE) == lease["id"]

    server.shutdown_kernel(leased)  # frees the lease at once: no heartbeat timeout involved
    (lease,) = server.leases()
    assert lease["state"] == "done" and lease["gpus"] == []


def test_gpu_lease_magic_restarts_a_running_kernel_with_its_lease(lab):
    server = lab()
    kernel = server.start_kernel("python3")
    assert server.env(kernel, ENV_CUDA) == NO_GPU
    out = server.run(kernel, "%load_ext jupyter_elastic_gpu\n%gpu_lease 1 --yes")
    assert "restarting the kernel with 1 GPU" in out

    def leased():
        leases = [j for j in server.leases() if j["state"] == "running"]
        return leases[0] if leases else None

    lease = server.until(leased, what="the lease to run")
    assert server.until(
        lambda: server.env_after_restart(kernel, ENV_CUDA) == ",".join(lease["gpus"]),
        what="the restarted kernel to see its GPU",
    )

    out = server.run(kernel, "%load_ext jupyter_elastic_gpu\n%gpu_lease 0 --yes")
    assert "without GPUs" in out
    # The lease ends once the kernel that held it has exited: the next one sees no GPU.
    assert server.until(lambda: [j["state"] for j in server.leases()] == ["done"])
    assert server.until(
        lambda: server.env_after_restart(kernel, ENV_CUDA) == NO_GPU, what="no GPU again"
    )


def test_a_lease_that_cannot_be_had_says_why_and_leaves_the_kernel_alone(lab):
    server = lab()
    kernel = server.start_kernel("python3")
    out = server.run(
        kernel,
        "%load_ext jupyter_elastic_gpu\n"
        "try:\n    %gpu_lease 5 --yes\nexcept Exception as e:\n    print('refused:', e)",
    )
    assert "refused:" in out and "more than the 4 GPUs of this server" in out
    assert server.env(kernel, ENV_CUDA) == NO_GPU
    assert server.leases() == []
