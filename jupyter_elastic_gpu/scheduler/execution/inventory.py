"""The GPU inventory: which GPUs this box has, how busy they are, and who else is on them.

On a box with an NVIDIA driver it asks NVML (nvidia-ml-py); elsewhere (laptops, CI, Binder) it
offers simulated GPUs so that the whole service runs the same way. GPU ids are NVML indices as
strings ("0", "1", ...): NVML enumerates in PCI bus order, so they are the ids
``CUDA_VISIBLE_DEVICES`` means when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (which the launcher sets).

``snapshot()`` blocks (NVML calls, /proc reads) for milliseconds: call it from a worker thread
(``asyncio.to_thread``) in the service. It never raises: a failing NVML call degrades to the
last good answer, so a flaky GPU cannot stop the scheduler.
"""

from __future__ import annotations

import logging
import math
import os
import pwd
import socket
import threading
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ...core.placement import describe_kinds
from ...core.slices import Slice
from .dcgm import DcgmExporter, Readings, instance_figure
from .gpukinds import SIMULATED, kind_of, memory_mb, mig_memory_mb, parse_layout, parse_simulated

log = logging.getLogger(__name__)  # under the package logger, which the app adopts

MIB = 1024 * 1024
#: GPUs offered when nothing was asked for and NVML finds none: enough to show elasticity.
FALLBACK_SIMULATED_GPUS = 4
#: Longest command line kept per process (an admin page shows it; argv can be huge).
MAX_COMMAND_CHARS = 1000


@dataclass
class GpuProcess:
    """A process holding GPU memory. ``memory_mb`` is MiB; None where NVML cannot tell."""

    pid: int
    user: str | None
    memory_mb: float | None
    command: str | None


@dataclass
class MigSlice:
    """One MIG instance of a GPU: its ``profile`` (``1g.10gb``), the UUID
    ``CUDA_VISIBLE_DEVICES`` names it by (``MIG-...``), its memory in MiB (None where NVML
    cannot tell)."""

    uuid: str
    profile: str
    memory_total_mb: float | None
    memory_used_mb: float | None
    #: 0..1, the share of time its engines were busy since the last snapshot, from NVML's GPU
    #: performance monitoring (Hopper and later); None where NVML reports none.
    utilization: float | None = None


@dataclass
class GpuInfo:
    """One GPU at one moment. Memory in MiB; ``utilization`` 0..1; None where unknown."""

    id: str
    index: int
    node: str
    name: str
    uuid: str | None
    memory_total_mb: float | None
    memory_used_mb: float | None
    utilization: float | None
    processes: list[GpuProcess] = field(default_factory=list)
    #: The GPU's kind (``gpukinds``): read from ``name`` when not given.
    kind: str = ""
    #: Its MIG instances when MIG mode is on (then CUDA cannot use it as one GPU, so no job is
    #: placed on it whole); None when MIG is off or not supported.
    mig: list[MigSlice] | None = None

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = kind_of(self.name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mig_slices(infos: Iterable[GpuInfo]) -> list[Slice]:
    """Every MIG instance of the GPUs, named by the UUID CUDA knows it by (its grant id)."""
    return [Slice(s.uuid, g.id, s.profile) for g in infos for s in g.mig or ()]


def device_ids(infos: Iterable[GpuInfo]) -> set[str]:
    """Every id a grant may name: each GPU's, and each of their MIG instances'."""
    infos = list(infos)
    return {g.id for g in infos} | {s.id for s in mig_slices(infos)}


class Inventory:
    """The contract of a GPU inventory: the base class to subclass for a lab's own
    (``c.ElasticGPUApp.inventory_class``; it is created without arguments)."""

    source = "simulated"  # "nvml" or "simulated": whether these are real GPUs
    reason = ""  # why this source: shown to users wondering where their GPUs are

    def snapshot(self) -> list[GpuInfo]:
        """Every GPU now; never raises (a failing read degrades to the last good answer)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the inventory holds (NVML)."""


# -- /proc: owners, command lines, parents -------------------------------------------------


def process_owner(pid: int) -> str | None:
    """User name owning ``pid`` (from the owner of /proc/<pid>), None if gone or nameless."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        return pwd.getpwuid(uid).pw_name
    except (OSError, KeyError):
        return None


def process_command(pid: int) -> str | None:
    """The command line of ``pid`` on one line, None if it is gone or hidden (hidepid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(MAX_COMMAND_CHARS * 4)
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not args:  # kernel threads and zombies have no command line
        return None
    text = " ".join(args).replace("\r", " ").replace("\n", " ")  # one line for tables
    return text if len(text) <= MAX_COMMAND_CHARS else text[: MAX_COMMAND_CHARS - 1] + "…"


def parent_pid(pid: int) -> int | None:
    """Parent of ``pid`` from /proc/<pid>/stat; None if it is gone (or there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and ")", so split after the last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def external_processes(
    infos: Iterable[GpuInfo], our_pids: set[int], held: Iterable[str] = ()
) -> dict[str, list[GpuProcess]]:
    """Per GPU id, the processes on it that the scheduler did not start.

    ``our_pids`` are the sidecars' and trainers' pids; their descendants count as ours too (a
    trainer's data-loader workers, a script's own subprocesses). ``held`` are the GPUs our jobs
    hold: on those, a pid that does not exist in this pid namespace counts as ours, because in
    a container NVML reports host pids and our own trainer is then invisible by its pid (a pid
    that is gone on a GPU nobody of ours holds is still external: it held memory there). Every
    GPU appears in the answer, with an empty list when only our processes (or none) are on it.
    """
    ours: dict[int, bool] = {}
    granted = set(held)

    def is_ours(pid: int) -> bool:
        chain, current = [], pid
        verdict = False
        while current and current > 1 and len(chain) < 256:
            if current in ours:
                verdict = ours[current]
                break
            if current in our_pids:
                verdict = True
                break
            chain.append(current)
            current = parent_pid(current)
        for p in chain:
            ours[p] = verdict
        return verdict

    def external(gpu: str, pid: int) -> bool:
        if is_ours(pid):
            return False
        return gpu not in granted or os.path.exists(f"/proc/{pid}")

    return {info.id: [p for p in info.processes if external(info.id, p.pid)] for info in infos}


# -- simulated --------------------------------------------------------------------------------


class SimulatedInventory(Inventory):
    """GPUs that exist only as labels, for machines without NVIDIA GPUs: ``gpus`` is a count
    or a description of kinds (``2xA100-80GB,2xT4``: ``gpukinds.parse_simulated``)."""

    source = "simulated"

    def __init__(self, gpus: int | str, node: str | None = None, reason: str | None = None) -> None:
        self.layout = parse_layout(gpus)
        self.kinds = tuple(g.kind for g in self.layout)
        if not self.kinds:
            raise ValueError(f"simulated GPUs: need at least 1, got {gpus!r}")
        self.count = len(self.kinds)
        self.node = node or socket.gethostname()
        mixed = set(self.kinds) != {SIMULATED}
        asked = f" ({describe_kinds(self.kinds)})" if mixed else ""
        self.reason = reason or f"{self.count} simulated GPUs were asked for{asked}"

    def snapshot(self) -> list[GpuInfo]:
        return [
            GpuInfo(
                id=str(i),
                index=i,
                node=self.node,
                name="Simulated GPU" if gpu.kind == SIMULATED else f"Simulated {gpu.kind}",
                uuid=None,
                memory_total_mb=memory_mb(gpu.kind),
                memory_used_mb=None,
                utilization=None,
                processes=[],
                kind=gpu.kind,
                mig=None
                if gpu.mig is None
                else [
                    MigSlice(f"MIG-simulated-{i}-{slot}", profile, mig_memory_mb(profile), None)
                    for slot, profile in enumerate(gpu.mig)
                ],
            )
            for i, gpu in enumerate(self.layout)
        ]

    def close(self) -> None:
        pass


# -- NVML -------------------------------------------------------------------------------------


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here; the message says why (no nvidia-ml-py, no driver, ...)."""


class NvmlInventory(Inventory):
    """The GPUs NVML sees on this host, with their memory, utilisation and compute processes.

    ``nvml`` is the pynvml module (or an object with the same functions); it is a parameter
    only so that the error handling can be exercised on machines without a GPU.
    """

    source = "nvml"

    def __init__(
        self, node: str | None = None, nvml: Any = None, dcgm: DcgmExporter | None = None
    ) -> None:
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError as e:
                raise NvmlUnavailable(
                    f"nvidia-ml-py is not installed ({e}): pip install nvidia-ml-py"
                ) from e
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as e:
            raise NvmlUnavailable(
                f"NVML could not start: {e} (is the NVIDIA driver loaded?)"
            ) from e
        try:
            self.count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as e:
            self._shutdown()
            raise NvmlUnavailable(f"NVML could not count the GPUs: {e}") from e
        self.node = node or socket.gethostname()
        self.reason = f"NVML found {self.count} GPU(s)"
        self._lock = threading.Lock()
        self._closed = False
        self._handles: dict[int, Any] = {}
        self._static: dict[int, tuple[str, str | None]] = {}
        self._last: dict[int, GpuInfo] = {}
        self._reported: set[tuple[int, str, str]] = set()
        self._no_mig: set[int] = set()  # GPUs that said MIG is not supported
        self._gpm: dict[int, bool] = {}  # GPU -> whether it samples its MIG instances (GPM)
        self._samples: dict[tuple[int, int], Any] = {}  # (GPU, GPU instance) -> last sample
        #: Where MIG instances' utilisation comes from on GPUs without GPM (A100, A30).
        self._dcgm = dcgm
        self._dcgm_now: Readings | None = None  # this snapshot's page, once read
        self._list_processes = nvml.nvmlDeviceGetComputeRunningProcesses

    def snapshot(self) -> list[GpuInfo]:
        with self._lock:
            if self._closed:
                return [replace(g, processes=list(g.processes)) for g in self._last.values()]
            self._dcgm_now = None
            infos = [self._read(i) for i in range(self.count)]
            self._last = {g.index: g for g in infos}
            return [replace(g, processes=list(g.processes)) for g in infos]

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._shutdown()

    # -- internals ----------------------------------------------------------------------------

    def _shutdown(self) -> None:
        for sample in self._samples.values():
            self._free(sample)
        self._samples.clear()
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError as e:
            log.debug("nvmlShutdown failed: %s", e)

    def _call(self, index: int, what: str, fn: Any, *args: Any) -> tuple[bool, Any]:
        """(True, value), or (False, None) after reporting the NVML error."""
        try:
            return True, fn(*args)
        except self._nvml.NVMLError as e:
            self._report(index, what, e)
            return False, None

    def _report(self, index: int, what: str, error: Exception) -> None:
        """Warn once per GPU, call and error kind: snapshots run every few seconds."""
        key = (index, what, type(error).__name__)
        level = logging.DEBUG if key in self._reported else logging.WARNING
        self._reported.add(key)
        log.log(
            level, "NVML %s failed on GPU %d: %s (keeping the last good value)", what, index, error
        )

    def _handle(self, index: int) -> Any:
        if index not in self._handles:
            ok, handle = self._call(index, "handle", self._nvml.nvmlDeviceGetHandleByIndex, index)
            if not ok:
                return None
            self._handles[index] = handle
        return self._handles[index]

    def _names(self, index: int, handle: Any, fallback: GpuInfo) -> tuple[str, str | None]:
        """Name and UUID never change: read once, but retry while a read fails."""
        if index not in self._static:
            ok_name, name = self._call(index, "name", self._nvml.nvmlDeviceGetName, handle)
            ok_uuid, uuid = self._call(index, "uuid", self._nvml.nvmlDeviceGetUUID, handle)
            if not (ok_name and ok_uuid):
                return (_text(name) if ok_name else fallback.name), (
                    _text(uuid) if ok_uuid else fallback.uuid
                )
            self._static[index] = (_text(name), _text(uuid))
        return self._static[index]

    def _read(self, index: int) -> GpuInfo:
        last = self._last.get(index)
        info = GpuInfo(
            id=str(index),
            index=index,
            node=self.node,
            name=last.name if last else "NVIDIA GPU",
            uuid=last.uuid if last else None,
            memory_total_mb=last.memory_total_mb if last else None,
            memory_used_mb=last.memory_used_mb if last else None,
            utilization=last.utilization if last else None,
            processes=list(last.processes) if last else [],
            mig=list(last.mig) if last and last.mig is not None else None,
        )
        handle = self._handle(index)
        if handle is None:
            return info
        info.name, info.uuid = self._names(index, handle, info)
        info.kind = kind_of(info.name)
        ok, mem = self._call(index, "memory", self._nvml.nvmlDeviceGetMemoryInfo, handle)
        if ok:
            info.memory_total_mb = mem.total / MIB
            info.memory_used_mb = mem.used / MIB
        ok, util = self._call(
            index, "utilization", self._nvml.nvmlDeviceGetUtilizationRates, handle
        )
        if ok:
            info.utilization = util.gpu / 100.0
        procs = self._processes(index, handle)
        if procs is not None:
            info.processes = procs
        info.mig = self._mig(index, handle, info.uuid, last.mig if last else None)
        return info

    def _mig(
        self, index: int, handle: Any, uuid: str | None, last: list[MigSlice] | None
    ) -> list[MigSlice] | None:
        """The GPU's MIG instances when MIG mode is on (None when off, or not supported:
        asked once). The scheduler never changes the layout: it reads the one it finds."""
        nvml = self._nvml
        if index in self._no_mig:
            return None
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError as e:
            if type(e).__name__ in ("NVMLError_NotSupported", "NVMLError_FunctionNotFound"):
                self._no_mig.add(index)  # not a MIG GPU, or a driver without MIG
                return None
            self._report(index, "MIG mode", e)
            return last
        if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
            self._forget(index)
            return None
        ok, most = self._call(index, "MIG count", nvml.nvmlDeviceGetMaxMigDeviceCount, handle)
        if not ok:
            return last
        slices: list[MigSlice] = []
        sampled: dict[tuple[int, int], float | None] = {}  # this snapshot's, per GPU instance
        for i in range(int(most)):
            try:
                sub = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
            except nvml.NVMLError as e:
                if type(e).__name__ != "NVMLError_NotFound":  # NotFound: an empty slot
                    self._report(index, "MIG handle", e)
                continue
            ok_uuid, uuid = self._call(index, "MIG uuid", nvml.nvmlDeviceGetUUID, sub)
            if not ok_uuid:
                continue
            ok_name, name = self._call(index, "MIG name", nvml.nvmlDeviceGetName, sub)
            ok_mem, mem = self._call(index, "MIG memory", nvml.nvmlDeviceGetMemoryInfo, sub)
            slices.append(
                MigSlice(
                    uuid=_text(uuid),
                    profile=mig_profile(_text(name)) if ok_name else "unknown",
                    memory_total_mb=mem.total / MIB if ok_mem else None,
                    memory_used_mb=mem.used / MIB if ok_mem else None,
                    utilization=self._mig_utilization(index, handle, uuid, sub, sampled),
                )
            )
        self._forget(index, keep=sampled)
        return slices

    def _forget(self, index: int, keep: Collection[tuple[int, int]] = ()) -> None:
        """Free the samples of GPU ``index``'s instances that are gone (all of them when its
        MIG mode was turned off)."""
        for key in [k for k in self._samples if k[0] == index and k not in keep]:
            self._free(self._samples.pop(key))

    def _mig_utilization(
        self,
        index: int,
        handle: Any,
        uuid: str | None,
        sub: Any,
        sampled: dict[tuple[int, int], float | None],
    ) -> float | None:
        """A MIG instance's utilisation between the last snapshot and this one, from NVML's
        GPU performance monitoring (GPM): NVML's device utilisation is not supported in MIG
        mode, but a GPU that has GPM (Hopper and later) samples each GPU instance (compute
        instances of one GPU instance share its figure). On a GPU without it, DCGM's figure
        for the instance where a DCGM Exporter is set (``dcgm.py``). None where neither
        says, at the first snapshot (GPM's figure needs two samples), or on an error
        (reported once)."""
        nvml = self._nvml
        if index not in self._gpm:  # asked once per GPU
            try:
                self._gpm[index] = bool(nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
            except (nvml.NVMLError, AttributeError):  # a driver or nvidia-ml-py without GPM
                self._gpm[index] = False
        if not self._gpm[index] and self._dcgm is None:
            return None
        ok, instance = self._call(index, "MIG instance id", nvml.nvmlDeviceGetGpuInstanceId, sub)
        if not ok:
            return None
        if not self._gpm[index]:
            if self._dcgm_now is None:  # one read of the exporter per snapshot
                self._dcgm_now = self._dcgm.read() if self._dcgm else {}
            return instance_figure(self._dcgm_now, uuid, index, int(instance))
        key = (index, int(instance))
        if key in sampled:
            return sampled[key]
        sampled[key] = figure = self._gpm_figure(index, handle, key)
        return figure

    def _gpm_figure(self, index: int, handle: Any, key: tuple[int, int]) -> float | None:
        nvml = self._nvml
        ok, sample = self._call(index, "MIG utilisation", nvml.nvmlGpmSampleAlloc)
        if not ok:
            return None
        if not self._call(
            index, "MIG utilisation", nvml.nvmlGpmMigSampleGet, handle, key[1], sample
        )[0]:
            self._free(sample)
            return None
        last, self._samples[key] = self._samples.get(key), sample
        if last is None:
            return None
        ok, busy = self._call(index, "MIG utilisation", gpm_busy, nvml, last, sample)
        self._free(last)
        return busy if ok else None

    def _free(self, sample: Any) -> None:
        try:
            self._nvml.nvmlGpmSampleFree(sample)
        except self._nvml.NVMLError as e:
            log.debug("nvmlGpmSampleFree failed: %s", e)

    def _processes(self, index: int, handle: Any) -> list[GpuProcess] | None:
        """Compute processes on the GPU with owner and command line; None if NVML failed."""
        nvml = self._nvml
        try:
            running = self._list_processes(handle)
        except nvml.NVMLError as e:
            # Drivers older than the bindings lack the _v3 entry point the default name uses.
            v2 = getattr(nvml, "nvmlDeviceGetComputeRunningProcesses_v2", None)
            if v2 is None or type(e).__name__ != "NVMLError_FunctionNotFound":
                self._report(index, "processes", e)
                return None
            self._list_processes = v2
            ok, running = self._call(index, "processes", v2, handle)
            if not ok:
                return None
        memory: dict[int, float | None] = {}
        for p in running:  # a process is listed once per MIG instance it uses: add them up
            used = None if p.usedGpuMemory is None else p.usedGpuMemory / MIB
            if p.pid not in memory:
                memory[p.pid] = used
            elif used is not None:
                memory[p.pid] = (memory[p.pid] or 0.0) + used
        return [
            GpuProcess(pid=pid, user=process_owner(pid), memory_mb=mb, command=process_command(pid))
            for pid, mb in memory.items()
        ]


def gpm_busy(nvml: Any, first: Any, second: Any) -> float | None:
    """How busy (0..1) the graphics engines were between two GPM samples of one GPU or GPU
    instance (``NVML_GPM_METRIC_GRAPHICS_UTIL``); None where NVML gives no figure. Raises
    what ``nvmlGpmMetricsGet`` raises."""
    got = nvml.c_nvmlGpmMetricsGet_t()
    got.version, got.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, 1
    got.sample1, got.sample2 = first, second
    got.metrics[0].metricId = nvml.NVML_GPM_METRIC_GRAPHICS_UTIL
    nvml.nvmlGpmMetricsGet(got)
    metric = got.metrics[0]
    if metric.nvmlReturn != nvml.NVML_SUCCESS or not math.isfinite(metric.value):
        return None
    return min(max(metric.value / 100.0, 0.0), 1.0)


def mig_profile(name: str) -> str:
    """A MIG instance's profile from its NVML name (``NVIDIA A100-SXM4-40GB MIG 1g.5gb``:
    ``1g.5gb``)."""
    _, sep, tail = name.rpartition(" MIG ")
    return tail.strip().lower() if sep and tail.strip() else name


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# -- choosing -------------------------------------------------------------------------------


def detect(
    simulated_gpus: int | str = 0, node: str | None = None, dcgm_exporter_url: str = ""
) -> tuple[Inventory, str]:
    """The inventory to serve and its source ("nvml" or "simulated").

    ``simulated_gpus`` asks for simulated GPUs: a count, or counts of kinds
    (``2xA100-80GB,2xT4``). With 0, NVML is used when it works and finds a GPU; otherwise the
    service still starts, on 4 simulated GPUs, and the log (and the inventory's ``reason``)
    says why, so a missing driver is visible, not fatal. ``dcgm_exporter_url``: where NVML's
    inventory reads MIG slices' utilisation that NVML does not report (``dcgm.py``).
    """
    if parse_simulated(simulated_gpus):  # (ValueError for a bad description)
        inventory = SimulatedInventory(simulated_gpus, node)
        log.info("GPU inventory: %s", inventory.reason)
        return inventory, "simulated"
    try:
        dcgm = DcgmExporter(dcgm_exporter_url) if dcgm_exporter_url else None
        nvml = NvmlInventory(node, dcgm=dcgm)
    except NvmlUnavailable as e:
        why = str(e)
    else:
        if nvml.count > 0:
            log.info("GPU inventory: %s", nvml.reason)
            return nvml, "nvml"
        nvml.close()
        why = "NVML works but finds no GPU"
    n = FALLBACK_SIMULATED_GPUS
    inventory = SimulatedInventory(n, node, reason=f"{why}; using {n} simulated GPUs")
    log.warning("GPU inventory: %s", inventory.reason)
    return inventory, "simulated"
