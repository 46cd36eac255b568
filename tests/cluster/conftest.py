"""A real local Ray cluster (``ray.cluster_utils.Cluster``): a head without GPUs and two GPU
nodes of 2 logical GPUs each, on 127.0.0.2 and 127.0.0.3; one per module (it takes seconds to
start), put back to those two nodes before each test. No node offers CPUs: every actor of
the backend asks for none, and a node with CPUs would start idle workers for them (Python
interpreters importing Ray, a CPU-second or more each, on every node a test adds)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from needs import module

ray = module("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from jupyter_elastic_gpu.scheduler.execution.ray_cluster import NAMESPACE  # noqa: E402

#: The GPU nodes each test starts with: node name (its address) -> logical GPUs.
NODES = {"127.0.0.2": 2, "127.0.0.3": 2}
#: Their kinds (Ray's ``accelerator_type:<kind>`` resource): a lab of two kinds of GPU.
KINDS = {"127.0.0.2": "A100-80GB", "127.0.0.3": "T4"}


#: Ray gives a new node 30 s (hard-coded) to register; a loaded 2-core machine (a TensorFlow
#: test on the other worker) can miss that window, so a start is tried this many times.
STARTS = 3


def started(start):
    """``start()``, tried again when Ray says the node timed out during its start-up; after
    ``STARTS`` such timeouts the module is skipped, saying so (Ray's own start-up on a machine
    too loaded for it, not this project's code: any other error fails)."""
    for attempt in range(1, STARTS + 1):
        try:
            return start()
        except Exception as e:
            if "timed out during startup" not in str(e):
                raise
            if attempt == STARTS:
                pytest.skip(
                    f"Ray could not start a node {STARTS} times (its 30 s to register): the "
                    "machine is too loaded for Ray; run tests/cluster on its own"
                )


class LocalCluster:
    def __init__(self, tmp) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ["RAY_TMPDIR"] = str(tmp)
        self.cluster = started(
            lambda: Cluster(
                initialize_head=True,
                head_node_args={"num_cpus": 0, "num_gpus": 0, "include_dashboard": False},
            )
        )
        self.nodes: dict[str, object] = {}
        self.address = self.cluster.address

    def add(self, name: str, gpus: int = 2) -> None:
        kind = {f"accelerator_type:{KINDS[name]}": 1} if name in KINDS else {}
        self.nodes[name] = started(
            lambda: self.cluster.add_node(
                num_cpus=0, num_gpus=gpus, node_ip_address=name, resources=kind
            )
        )
        self.cluster.wait_for_nodes()

    def remove(self, name: str) -> None:
        self.cluster.remove_node(self.nodes.pop(name))

    def reset(self) -> None:
        for name in [n for n in self.nodes if n not in NODES]:
            self.remove(name)
        for name, gpus in NODES.items():
            if name not in self.nodes:
                self.add(name, gpus)

    def shutdown(self) -> None:
        if ray.is_initialized():
            ray.shutdown()
        self.cluster.shutdown()


@pytest.fixture(scope="module")
def local_cluster():
    # A short folder of its own: Ray's socket paths under it must stay within AF_UNIX's 107
    # bytes, which pytest's temp folders (longer under pytest-xdist's workers) can pass.
    tmp = tempfile.mkdtemp(prefix="ray-")
    cluster = LocalCluster(tmp)
    yield cluster
    cluster.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def ray_cluster(local_cluster):
    local_cluster.reset()
    yield local_cluster
    # end the actors this test's scheduler left (their sidecars end with them)
    if not ray.is_initialized():
        ray.init(address=local_cluster.address, namespace=NAMESPACE, log_to_driver=False)
    for name in ray.util.list_named_actors():
        ray.kill(ray.get_actor(name))
    ray.shutdown()


@pytest.fixture
def jp_serverapp(jp_serverapp, backend, jp_asyncio_loop):
    """The server, its scheduler stopped before the Ray cluster goes (``ray_cluster``'s
    clean-up shuts Ray down; pytest-jupyter stops the server's extensions only after that).
    A scheduler still asking Ray then got ``SystemExit`` out of Ray's client, which cut the
    server's clean-up short: its database stayed open and the run could not exit."""
    yield jp_serverapp
    if backend == "ray":
        jp_asyncio_loop.run_until_complete(jp_serverapp.cleanup_extensions())


@pytest.fixture
def backend():
    """The cluster backend under test: Ray here, unless a test module says otherwise."""
    return "ray"


@pytest.fixture
def jp_server_config(jp_server_config, backend, request):
    """The extension over the Ray cluster (no token on a throw-away local cluster), or on
    this server's 4 simulated GPUs for the single-server backend."""
    if backend == "ray":
        cluster = request.getfixturevalue("ray_cluster")
        app = jp_server_config["ElasticGPUApp"]
        del app["simulated_gpus"]
        app.update(cluster_backend="ray", ray_address=cluster.address, ray_allow_insecure=True)
    return jp_server_config
