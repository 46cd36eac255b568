"""``elastic-gpu-provisioner``: a local kernel that sees no GPU, or exactly its lease's GPUs.

A jupyter_client kernel provisioner (``LocalProvisioner`` plus the GPUs), so it applies to
every front end that starts kernels through jupyter_client: JupyterLab (the server's kernel
manager), nbclient, papermill, Voila. Without a lease (``gpus`` 0, the default) the kernel gets
``CUDA_VISIBLE_DEVICES=-1``: CUDA enumerates no device, and TensorFlow maps and reserves no GPU.

With ``gpus`` N (a kernel spec "Python 3 (N GPUs)", or ``%gpu_lease N``) it asks the scheduler
for a lease of N GPUs (with ``mig``, one MIG instance of that profile: ``%gpu_lease 1g.10gb``)
before the kernel starts, waits at most ``admission_timeout`` for them
(the kernel does not start, with the lease's reason and estimated start, when they do not
come), and starts the kernel with exactly those GPUs visible and TensorFlow's memory growth on.
While the kernel lives it heartbeats on the kernel's behalf: its idleness (from the server's
kernel manager, for idle reclaim), and the kernel's death, reported at once. When the scheduler
takes the lease back (idle reclaim, a cancel in the sidebar) it restarts the kernel without
GPUs; when the kernel shuts down, the lease ends at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import inspect
import time
from typing import Any

from elastic_gpu_sidecar.protocol import ENV_GPUS, GrantAction, SidecarState, device_index
from jupyter_client.provisioning import LocalProvisioner
from traitlets import Float, Int, Unicode

from ..errors import ElasticGPUError
from . import (
    ENV_CUDA,
    ENV_DEFAULT_PROVISIONER,
    ENV_LEASE,
    ENV_TF_GROWTH,
    NO_GPU,
    PROVISIONER_NAME,
)
from .activity import manager_idle_s
from .channel import Channel, channel


class LeaseNotGranted(ElasticGPUError):
    """No lease within the admission timeout, or the lease was refused: says why and when."""

    status, reason = 409, "lease-not-granted"


def _when(t: float | None) -> str:
    if t is None:
        return "no estimate"
    return datetime.datetime.fromtimestamp(t).strftime("%H:%M")


class ElasticGPUProvisioner(LocalProvisioner):
    """A local kernel with no GPU, or with the GPUs of its lease (see the module)."""

    gpus = Int(
        0,
        min=0,
        config=True,
        help="GPUs this kernel leases from the elastic-gpu scheduler (0: none, and no GPU is "
        "visible to it). Kernel specs set it in metadata.kernel_provisioner.config.",
    )
    mig = Unicode(
        "",
        config=True,
        help="A MIG profile (1g.10gb): the kernel leases one MIG instance of it instead of "
        "whole GPUs (gpus is then 1). Kernel specs set it in metadata.kernel_provisioner.config.",
    )
    admission_timeout = Float(
        120.0,
        min=0.0,
        config=True,
        help="Seconds a kernel start waits for its lease to be admitted; then the kernel does "
        "not start and the error says why (the lease's reason and estimated start).",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lease: dict | None = None  # the lease held (POST leases' answer)
        self.lease_gpus: list[str] = []
        self.generation = 0
        self.release_next = False  # the next start is without GPUs (the lease was taken back)
        self._channel: Channel | None = None
        self._beats: asyncio.Task | None = None
        self._stopping = False
        self._restarting: asyncio.Task | None = None
        self._previous: dict | None = None  # a lease replaced by acquire(), ended at next start

    # -- the lease ----------------------------------------------------------------------------
    def _scheduler(self) -> Channel:
        if self._channel is None:
            self._channel = channel()
        return self._channel

    @property
    def lease_id(self) -> str | None:
        return self.lease["job"]["id"] if self.lease else None

    async def acquire(self, gpus: int, mig: str | None = None) -> dict:
        """Lease ``gpus`` GPUs (or one MIG instance of profile ``mig``) and wait for them (at
        most ``admission_timeout``); the lease held before, if any, is let go at the next
        start. Raises LeaseNotGranted saying why."""
        ch = self._scheduler()
        name = f"kernel-{str(self.kernel_id)[:8]}"
        asked: dict[str, Any] = {"gpus": gpus, "name": name}
        if mig:
            asked["mig"] = mig
        lease = await ch.open(asked)
        deadline = time.monotonic() + self.admission_timeout
        pause = min(float(lease.get("heartbeat_interval") or 2.0), 1.0)
        while True:
            view = await ch.beat(lease, {"job_id": lease["job"]["id"]})
            if view.get("action") == GrantAction.CANCEL:
                raise LeaseNotGranted(f"the GPU lease {lease['job']['id']} was cancelled")
            if view.get("gpus"):
                break
            if time.monotonic() >= deadline:
                why = await self._why_waiting(ch, lease["job"]["id"])
                await self._end(lease, SidecarState.CANCELLED)
                what = f"{mig} MIG slice" if mig else f"{gpus} GPU(s)"
                raise LeaseNotGranted(
                    f"no {what} within {self.admission_timeout:g} s: {why}. Pick a "
                    "kernel without GPUs, or try again later (the lease was withdrawn)."
                )
            await asyncio.sleep(pause)
        if self.lease is not None and self.lease is not lease:
            self._previous = self.lease
        self.lease, self.lease_gpus = lease, list(view["gpus"])
        self.generation = int(view.get("generation") or 0)
        return lease

    def _lease_fits(self) -> bool:
        """Whether the lease held is what the kernel is set to have (its GPUs, its slice)."""
        if self.lease is None:
            return False
        if self.mig:
            return (self.lease["job"].get("mig") or "") == self.mig.lower()
        return not self.lease["job"].get("mig") and len(self.lease_gpus) == self.gpus

    async def _why_waiting(self, ch: Channel, job_id: str) -> str:
        with contextlib.suppress(Exception):
            for entry in (await ch.queue()).get("queue", []):
                if entry.get("id") == job_id:
                    place = entry.get("position")
                    return (
                        f"{entry.get('reason')} (place {place} in the queue, estimated start "
                        f"{_when(entry.get('estimated_start'))})"
                    )
        return "the GPUs are busy"

    async def _end(self, lease: dict | None, state: SidecarState) -> None:
        """Tell the scheduler the kernel no longer uses the lease (it is freed at once)."""
        if lease is None:
            return
        body = {"job_id": lease["job"]["id"], "state": state.value, "gpus": []}
        try:
            await self._scheduler().beat(lease, body)
        except Exception as e:  # the scheduler ends it itself after its heartbeat timeout
            self.log.warning("elastic-gpu: lease %s not ended: %s", lease["job"]["id"], e)

    # -- the provisioner's life cycle -----------------------------------------------------------
    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        previous, self._previous = self._previous, None
        await self._end(previous, SidecarState.DONE)
        if self.release_next or not self.gpus:
            await self._end(self.lease, SidecarState.DONE)
            self.lease, self.lease_gpus = None, []
            self.release_next = False
        elif not self._lease_fits():
            await self.acquire(self.gpus, self.mig or None)
        kwargs = await super().pre_launch(**kwargs)
        env = kwargs["env"]
        env.setdefault(ENV_DEFAULT_PROVISIONER, PROVISIONER_NAME)
        if self.lease:
            env[ENV_CUDA] = ",".join(device_index(g) for g in self.lease_gpus)
            env[ENV_TF_GROWTH] = "true"
            env[ENV_GPUS] = ",".join(self.lease_gpus)
            env[ENV_LEASE] = self.lease_id or ""
        else:
            env[ENV_CUDA] = NO_GPU
            env.pop(ENV_GPUS, None)
            env.pop(ENV_LEASE, None)
        self._stopping = False
        return kwargs

    async def post_launch(self, **kwargs: Any) -> None:
        await super().post_launch(**kwargs)
        if self.lease is not None:
            try:
                await self._beat_once()  # the kernel runs on the lease: confirmed now
            except Exception as e:  # confirmed by the next one
                self.log.warning("elastic-gpu: lease heartbeat failed: %s", e)
            self._beats = asyncio.create_task(self._heartbeats(), name="elastic-gpu-lease")

    async def shutdown_requested(self, restart: bool = False) -> None:
        self._stopping = True  # the kernel exits on purpose: not a death to report
        await super().shutdown_requested(restart=restart)

    async def kill(self, restart: bool = False) -> None:
        self._stopping = True
        await super().kill(restart=restart)

    async def terminate(self, restart: bool = False) -> None:
        self._stopping = True
        await super().terminate(restart=restart)

    async def cleanup(self, restart: bool = False) -> None:
        self._stop_beats()
        if not restart:  # shut down for good: the lease is freed at once
            await self._end(self.lease, SidecarState.DONE)
            self.lease, self.lease_gpus = None, []
        await super().cleanup(restart=restart)

    def _stop_beats(self) -> None:
        task, self._beats = self._beats, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    # -- heartbeats ------------------------------------------------------------------------------
    def idle_s(self) -> float | None:
        """Seconds since the kernel last ran code, from the Jupyter server's kernel manager
        (None outside a server: such a kernel is never reclaimed for idleness)."""
        return manager_idle_s(self.parent)

    async def _beat_once(self) -> dict:
        lease = self.lease
        assert lease is not None
        body: dict[str, Any] = {
            "job_id": lease["job"]["id"],
            "generation": self.generation,
            "gpus": self.lease_gpus,
            "state": SidecarState.RUNNING.value,
        }
        if self.pid:
            body["trainer_pid"] = self.pid
        idle = self.idle_s()
        if idle is not None:
            body["idle_s"] = round(idle, 1)
        return await self._scheduler().beat(lease, body)

    async def _heartbeats(self) -> None:
        lease = self.lease
        interval = float(lease.get("heartbeat_interval") or 2.0) if lease else 2.0
        while self.lease is not None:
            await asyncio.sleep(interval)
            if self._stopping:
                continue
            if self.process is None or self.process.poll() is not None:
                self.log.warning("elastic-gpu: kernel %s died: its lease ends", self.kernel_id)
                await self._end(self.lease, SidecarState.FAILED)
                self.lease, self.lease_gpus = None, []
                return
            try:
                view = await self._beat_once()
            except Exception as e:  # the scheduler may be restarting: keep trying
                self.log.warning("elastic-gpu: lease heartbeat failed: %s", e)
                continue
            if view.get("action") != GrantAction.RUN or not view.get("gpus"):
                self.log.info(
                    "elastic-gpu: kernel %s: its GPU lease was taken back; restarting it "
                    "without GPUs",
                    self.kernel_id,
                )
                self.release_next = True
                self._restarting = asyncio.create_task(self._restart_without_gpus())
                return

    async def _restart_without_gpus(self) -> None:
        """Restart this kernel through the server's kernel manager when there is one (its
        clients see an ordinary restart; the notebook keeps its outputs)."""
        km = self.parent
        mkm = getattr(km, "parent", None)
        try:
            if mkm is not None and hasattr(mkm, "restart_kernel") and self.kernel_id in mkm:
                done = mkm.restart_kernel(self.kernel_id)
            else:
                done = km.restart_kernel(now=False)
            if inspect.isawaitable(done):
                await done
        except Exception:
            self.log.exception(
                "elastic-gpu: kernel %s: restart without GPUs failed", self.kernel_id
            )
