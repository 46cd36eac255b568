"""Several GPU servers: the scheduler's inventory and launcher over a Ray cluster.

Ray provides the nodes, their GPUs and the remote processes; the scheduler stays the one
authority on policy and decides the exact GPUs. GPU ids are ``NODE:INDEX`` (NODE is the Ray
node's name: its IP address unless ``ray start --node-name`` says otherwise). A job runs on one
node: one detached actor per sidecar, pinned to that node, starts ``python -m
elastic_gpu_sidecar run`` there with the scheduler's GPU ids (Ray never picks them) and waits
for it. The sidecar ends with its actor (``--die-with-parent``): a lost node takes its sidecars
with it, and the scheduler resumes their jobs from their last checkpoints on the GPUs left.

Security (docs/several-servers.md): Ray has no access control between its users, so the
cluster is refused without token authentication (unless ``ray_allow_insecure``), sidecars and
trainers get neither the address nor the token in their environment, and every trainer runs as
the OS user of its Ray node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

from elastic_gpu_sidecar import protocol as P
from elastic_gpu_sidecar.procs import wait_group_gone

from ...models import LaunchRequest
from .dcgm import DcgmExporter
from .gpukinds import KIND, SIMULATED, memory_mb
from .inventory import GpuInfo, Inventory, MigSlice, NvmlInventory, NvmlUnavailable
from .launcher import (
    PlaceGone,
    ProcessLauncher,
    kill_tree,
    open_job_dir,
    sidecar_command,
    sidecar_env,
    spawn_sidecar,
)

log = logging.getLogger(__name__)

#: Ray namespace of the scheduler's actors (named, so a restarted scheduler finds them).
NAMESPACE = "jupyter-elastic-gpu"
#: Name prefix of the actor that hosts one generation of a job's sidecar.
SIDECAR_ACTOR = "elastic-gpu-sidecar-"
#: Seconds a node may take to start a sidecar's actor before the launch counts as failed.
START_TIMEOUT_S = 60.0
#: Seconds a sidecar's actor may take to end the sidecar, its trainer and what they started
#: before the actor is killed regardless (only a node that stopped answering takes that long).
END_WAIT_S = 30.0
#: Seconds a node's GPU probe may take before its last answer is used.
PROBE_TIMEOUT_S = 10.0
#: How long closing waits for a call to Ray in another thread (Ray's own timeouts bound it,
#: unless Ray itself hangs: then the server stops without disconnecting, which its exit does).
CLOSE_WAIT_S = 3 * PROBE_TIMEOUT_S


class RayUnavailable(RuntimeError):
    """The Ray cluster cannot be used; the message says why and what to do."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise RayUnavailable(
            f"cluster_backend 'ray' needs Ray ({e}): pip install 'jupyter-elastic-gpu[ray]'"
        ) from None
    return ray


def gpu_id(node: str, index: int) -> str:
    return f"{node}:{index}"


def node_of(gpu: str) -> str:
    """The node of a cluster GPU id (``NODE:INDEX``)."""
    node, sep, _ = gpu.rpartition(":")
    if not sep:
        raise ValueError(f"{gpu!r} is not a GPU of a Ray cluster (NODE:INDEX)")
    return node


@dataclass(frozen=True)
class Node:
    """An alive Ray node and the GPUs Ray says it has."""

    name: str
    node_id: str
    gpus: int
    #: The kind Ray's ``accelerator_type:<kind>`` resource names (Ray sets it on a node with
    #: GPUs; ``ray start --resources '{"accelerator_type:T4": 1}'`` on one without), or "".
    kind: str = ""


class RayCluster:
    """One connection of this scheduler to a Ray cluster: its nodes, and its actors."""

    def __init__(self, address: str, allow_insecure: bool = False) -> None:
        ray = _ray()
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address or None,
                    namespace=NAMESPACE,
                    log_to_driver=False,
                    configure_logging=False,
                )
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise RayUnavailable(
                    f"cannot connect to the Ray cluster at {address or '(auto)'}: {e}; is "
                    "`ray start --head` running there (c.ElasticGPUApp.ray_address = "
                    '"HOST:PORT")?'
                ) from None
        from ray._private.authentication.authentication_utils import is_token_auth_enabled

        if not is_token_auth_enabled() and not allow_insecure:
            ray.shutdown()
            raise RayUnavailable(
                f"the Ray cluster at {address or '(auto)'} is reached without token "
                "authentication: anyone who can reach it can run code as its nodes' user. Start "
                "every node and this server with RAY_AUTH_MODE=token (Ray 2.52 or later; see "
                "`ray get-auth-token --generate`), or, for a trusted test setup only, set "
                "c.ElasticGPUApp.ray_allow_insecure = True"
            )
        self.ray = ray
        self.address = address
        # Ray ends the whole process when a thread calls it after ``ray.shutdown()``: a call
        # from a worker thread (the inventory's) holds this lock, and ``close`` waits for it.
        self.lock = threading.RLock()
        self.closed = False

    def nodes(self) -> list[Node]:
        """Alive nodes, in a stable order (blocking: a call to Ray's control store)."""
        out = []
        for n in self.ray.nodes():
            if n.get("Alive"):
                resources = n.get("Resources", {})
                gpus = int(resources.get("GPU", 0))
                name = n.get("NodeName") or n["NodeManagerAddress"]
                out.append(Node(name, n["NodeID"], gpus, accelerator_kind(resources)))
        return sorted(out, key=lambda n: n.name)

    def close(self) -> None:
        """Disconnect, once no thread is in a call to Ray (see ``lock``)."""
        if not self.lock.acquire(timeout=CLOSE_WAIT_S):
            self.closed = True  # no new call; the one in flight keeps the connection it needs
            log.warning(
                "a call to the Ray cluster has not returned in %.0f s; stopping without "
                "disconnecting from it (the process's exit does)",
                CLOSE_WAIT_S,
            )
            return
        try:
            self.closed = True
            if self.ray.is_initialized():
                self.ray.shutdown()
        finally:
            self.lock.release()


# -- the inventory ---------------------------------------------------------------------------


class _NvmlProbe:
    """Lives on one node (no CPU held): that node's GPUs as NVML sees them, or None; its MIG
    slices' utilisation from the DCGM Exporter at ``dcgm_url`` on that node, where set."""

    def __init__(self, node: str, dcgm_url: str = "") -> None:
        dcgm = DcgmExporter(dcgm_url) if dcgm_url else None
        try:
            self.nvml: NvmlInventory | None = NvmlInventory(node, dcgm=dcgm)
        except NvmlUnavailable:
            self.nvml = None

    def snapshot(self) -> list[dict] | None:
        if self.nvml is None:
            return None
        return [g.to_dict() for g in self.nvml.snapshot()]


class RayInventory(Inventory):
    """Every alive node's GPUs: NVML's view through a small actor on each node, or Ray's
    count of logical GPUs where a node has no NVIDIA driver (simulated GPUs).

    Process lists are left empty: pids are the node's own, so telling our trainers from
    others' processes is a single-server feature.
    """

    def __init__(
        self, cluster: RayCluster, probe_nvml: bool = True, dcgm_exporter_url: str = ""
    ) -> None:
        self.cluster = cluster
        self.probe_nvml = probe_nvml
        self.dcgm_exporter_url = dcgm_exporter_url  # each node reads its own exporter
        self._probes: dict[str, Any] = {}
        self._last: dict[str, list[GpuInfo]] = {}
        self._lock = threading.Lock()
        self.source = "simulated"
        self.reason = f"Ray cluster at {cluster.address or '(auto)'}"

    def snapshot(self) -> list[GpuInfo]:
        with self._lock, self.cluster.lock:
            if self.cluster.closed:  # the server is stopping: the last answer stands
                return [g for infos in self._last.values() for g in infos]
            try:
                nodes = self.cluster.nodes()
            except Exception:  # the control store is away: the last answer stands
                return [g for infos in self._last.values() for g in infos]
            with_gpus = [n for n in nodes if n.gpus > 0]
            probed = self._probe(with_gpus)
            found = {n.name: probed.get(n.name) or _logical(n) for n in with_gpus}
            self._last = found
            real = bool(found) and all(probed.get(n.name) for n in with_gpus)
            self.source = "nvml" if real else "simulated"
            n = sum(len(v) for v in found.values())
            self.reason = f"Ray cluster: {n} GPUs on {len(found)} nodes"
            return [g for infos in found.values() for g in infos]

    def _probe(self, nodes: list[Node]) -> dict[str, list[GpuInfo]]:
        """NVML's GPUs of each node that has a driver, asked of all nodes at once; a node that
        does not answer in time keeps its last NVML answer."""
        if not self.probe_nvml or not nodes:
            return {}
        ray = self.cluster.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        asked = {}
        for node in nodes:
            probe = self._probes.get(node.node_id)
            if probe is None:
                pinned = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
                probe = self._probes[node.node_id] = (
                    ray.remote(num_cpus=0)(_NvmlProbe)
                    .options(scheduling_strategy=pinned)
                    .remote(node.name, self.dcgm_exporter_url)
                )
            asked[node] = probe.snapshot.remote()
        ray.wait(list(asked.values()), num_returns=len(asked), timeout=PROBE_TIMEOUT_S)
        out = {}
        for node, ref in asked.items():
            try:
                rows = ray.get(ref, timeout=0)
            except Exception:  # late, or its actor died: ask a new one next time
                self._probes.pop(node.node_id, None)
                last = self._last.get(node.name)
                if last and last[0].uuid:
                    out[node.name] = last
                continue
            if rows is not None:
                out[node.name] = [
                    _from_row(row, gpu_id(node.name, row["index"])) for row in rows[: node.gpus]
                ]
        return out


def _from_row(row: dict, gpu: str) -> GpuInfo:
    """A GPU as a node's probe sent it (``GpuInfo.to_dict``), under its cluster-wide id."""
    mig = row.get("mig")
    return GpuInfo(
        **{
            **row,
            "id": gpu,
            "processes": [],
            "mig": None if mig is None else [MigSlice(**m) for m in mig],
        }
    )


def accelerator_kind(resources: dict) -> str:
    """The GPU kind a Ray node's resources name (``accelerator_type:A100``), or "" (none, or
    several: then the GPUs say nothing rather than something wrong)."""
    kinds = [
        key.split(":", 1)[1]
        for key in resources
        if key.startswith("accelerator_type:") and KIND.fullmatch(key.split(":", 1)[1])
    ]
    return kinds[0] if len(kinds) == 1 else ""


def _logical(node: Node) -> list[GpuInfo]:
    return [
        GpuInfo(
            id=gpu_id(node.name, i),
            index=i,
            node=node.name,
            name=f"Simulated {node.kind} (Ray logical GPU)"
            if node.kind
            else "Simulated GPU (Ray logical GPU)",
            uuid=None,
            memory_total_mb=memory_mb(node.kind) if node.kind else None,
            memory_used_mb=None,
            utilization=None,
            kind=node.kind or SIMULATED,
        )
        for i in range(node.gpus)
    ]


# -- the launcher ----------------------------------------------------------------------------


class SidecarHost:
    """Lives on the job's node (no CPU held) for as long as one sidecar runs there: it ends
    itself when its sidecar ends, so no idle actor is left behind whoever is listening.

    ``start`` and ``end`` exclude each other, and an actor once asked to end starts nothing
    more: a launch given up on (its node slow to start the actor) can end what that actor may
    already have started, or be sure it never will, before the job's GPUs go to another job."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.ended = False
        self.lock = threading.Lock()

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        pass_env: list[str],
        secret: str,
        cwd: str,
        out: str,
    ) -> int:
        base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # no address
        env = sidecar_env(base, secret, env, pass_env)
        if not os.path.isdir(cwd):
            cwd = os.path.dirname(out)
        run = argv.index("run") + 1  # `python -m elastic_gpu_sidecar run ...`
        with self.lock:
            if self.ended:
                raise RuntimeError("this launch was given up on before its sidecar started")
            with open(out, "ab") as log:
                argv = [*argv[:run], "--die-with-parent", str(os.getpid()), *argv[run:]]
                self.proc = spawn_sidecar(argv, env, cwd, log)
        threading.Thread(target=self._end_with_sidecar, daemon=True).start()
        return self.proc.pid

    def _end_with_sidecar(self) -> None:
        self.proc.wait()
        import ray

        ray.kill(ray.get_runtime_context().current_actor)

    def wait(self) -> int:
        return self.proc.wait()

    def signal(self, signum: int) -> bool:
        if self.proc.poll() is not None:
            return False
        os.killpg(self.proc.pid, signum)
        return True

    def end(self) -> bool:
        """End the sidecar, its trainer and what they started, at once (``ray.kill`` alone
        would miss them: they lead sessions of their own), and wait until they are gone."""
        with self.lock:
            self.ended = True
            if self.proc is None or self.proc.poll() is not None:
                return False
            groups = kill_tree(self.proc.pid)
            self.proc.wait()
            for group in groups:  # a SIGKILLed process takes a moment to let its GPUs go
                wait_group_gone(group)
            return True


class RayLauncher(ProcessLauncher):
    """Start each sidecar in an actor on the node of its GPUs."""

    spans_nodes = True

    def __init__(self, cluster: RayCluster, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        ray = cluster.ray
        self._host = ray.remote(num_cpus=0, max_concurrency=4)(SidecarHost)
        self._running: dict[str, tuple[Any, Any]] = {}  # actor name -> (actor, its wait)
        errors = ray.exceptions
        self._gone = (errors.RayActorError, errors.ActorUnschedulableError, errors.NodeDiedError)
        for name in ray.util.list_named_actors():
            if name.startswith(SIDECAR_ACTOR):  # sidecars started before our restart
                actor = ray.get_actor(name)
                self._running[name] = (actor, actor.wait.remote())

    async def launch(self, request: LaunchRequest) -> dict[str, Any]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = {node_of(g) for g in request.gpus}
        if len(nodes) != 1:
            raise ValueError(f"a job runs on one node; GPUs {request.gpus} span {len(nodes)}")
        node = nodes.pop()
        found = {n.name: n for n in self.cluster.nodes()}.get(node)
        if found is None:
            raise PlaceGone(f"Ray node {node} left the cluster")
        open_job_dir(request).close()  # job dir and script, on storage every node sees
        name = f"{SIDECAR_ACTOR}{request.job_id}-{request.generation}"
        actor = self._host.options(
            name=name,
            lifetime="detached",
            scheduling_strategy=NodeAffinitySchedulingStrategy(found.node_id, soft=False),
        ).remote()
        argv = sidecar_command(request, self.python or sys.executable, self.standby)
        out = os.path.join(request.job_dir, P.SIDECAR_OUT)
        cwd = request.spec.cwd or request.job_dir
        started = actor.start.remote(
            argv, dict(self.environment), list(self.pass_env), request.secret, cwd, out
        )
        try:
            pid = await self._started(started)
        except (asyncio.TimeoutError, *self._gone) as e:  # the node died under the launch
            await self._ended(actor)
            raise PlaceGone(
                f"Ray node {node} did not start the sidecar ({type(e).__name__})"
            ) from None
        self._running[name] = (actor, actor.wait.remote())
        self.log.info(
            "job %s: sidecar started on Ray node %s (pid %s there) on GPUs %s",
            request.job_id,
            node,
            pid,
            ",".join(request.gpus),
        )
        return {"ray_actor": name, "node": node, "remote_pid": pid}

    async def _started(self, started: Any) -> int:
        """The sidecar's pid there, once the node has started it (within ``START_TIMEOUT_S``)."""
        return await asyncio.wait_for(asyncio.wrap_future(started.future()), START_TIMEOUT_S)

    async def _ended(self, actor: Any) -> None:
        """End what an actor started (``SidecarHost.end``), then the actor. Asked of a launch
        given up on: a loaded node may have started its sidecar, even its trainer, just as the
        launch timed out, and the job's GPUs go to another job once they are gone."""
        try:
            await asyncio.wait_for(asyncio.wrap_future(actor.end.remote().future()), END_WAIT_S)
        except (asyncio.TimeoutError, *self._gone):  # its node is gone: so are its processes
            pass
        except Exception as e:  # the actor failed to end them: its node is not answering
            self.log.warning("a sidecar's actor could not end it: %s", e)
        with contextlib.suppress(Exception):
            self.cluster.ray.kill(actor)

    def alive(self, record: dict[str, Any]) -> bool | None:
        entry = self._running.get(record.get("ray_actor", ""))
        if entry is None:
            return None  # not ours to tell: its heartbeats say
        actor, waiting = entry
        try:
            ready, _ = self.cluster.ray.wait([waiting], timeout=0)
        except Exception:  # the cluster is away: its heartbeats say
            return None
        if not ready:
            return True
        del self._running[record["ray_actor"]]
        with contextlib.suppress(Exception):  # its sidecar ended, or its node is gone
            self.cluster.ray.kill(actor)
        return False

    async def signal(self, record: dict[str, Any], signum: int = signal.SIGTERM) -> bool:
        entry = self._running.get(record.get("ray_actor", ""))
        if entry is None:
            return False
        try:
            return bool(await entry[0].signal.remote(signum))
        except Exception:  # the actor (or its node) is gone
            return False

    async def end(self, record: dict[str, Any]) -> bool:
        entry = self._running.get(record.get("ray_actor", ""))
        if entry is None:
            return False
        await self._ended(entry[0])
        return True
