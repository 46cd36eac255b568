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
