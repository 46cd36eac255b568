"""The GPU inventory: simulated GPUs, NVML detection and its fallbacks, processes on the GPUs.

This machine has no NVIDIA driver, so NVML itself cannot run here: `detect(0)` and
`NvmlInventory()` are checked against the real pynvml failing for real. How a snapshot reads
and degrades is checked with `FakeNvml`, a stand-in limited to the pynvml functions the
inventory calls and raising pynvml's own error classes; a test keeps its names in step with
pynvml. Processes, owners, command lines and parent chains are real processes of this test.
`benchmarks/gpu_nvml_check.py` runs the real thing on a GPU machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pwd
import socket
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pynvml
import pytest

from jupyter_elastic_gpu.scheduler.execution.inventory import (
    FALLBACK_SIMULATED_GPUS,
    GpuInfo,
    GpuProcess,
    NvmlInventory,
    NvmlUnavailable,
    SimulatedInventory,
    detect,
    external_processes,
    parent_pid,
    process_command,
    process_owner,
)

MIB = 1024 * 1024
ME = pwd.getpwuid(os.getuid()).pw_name


def nvml_works_here() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


class FakeNvml:
    """The pynvml calls NvmlInventory makes, over a list of GPU dicts; ``fail`` injects errors.

    ``fail[(call, index)] = pynvml error code`` makes that call raise pynvml.NVMLError(code),
    which pynvml turns into its specific subclass, as the real library does.
    """

    NVMLError = pynvml.NVMLError

    def __init__(self, gpus: list[dict], init_error: int | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.fail: dict[tuple[str, int], int] = {}
        self.calls: list[str] = []
        self.shut_down = False
        self.taken: list[None] = []  # GPM samples allocated
        self.samples: dict[int, int | None] = {}  # those not freed: number -> GPU instance

    def _check(self, call: str, index: int) -> None:
        self.calls.append(call)
        if (call, index) in self.fail:
            raise pynvml.NVMLError(self.fail[(call, index)])

    def nvmlInit(self):
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shut_down = True

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._check("handle", index)
        return index

    # A MIG instance's handle is (GPU index, slot); its fields are in the GPU's "mig" list.
    def _of(self, h) -> dict:
        return self.gpus[h[0]]["mig"][h[1]] if isinstance(h, tuple) else self.gpus[h]

    def nvmlDeviceGetName(self, h):
        self._check("name", h)
        return self._of(h)["name"]

    def nvmlDeviceGetUUID(self, h):
        self._check("uuid", h)
        return self._of(h)["uuid"]

    def nvmlDeviceGetMemoryInfo(self, h):
        self._check("memory", h)
        g = self._of(h)
        return SimpleNamespace(total=g["total"] * MIB, used=g["used"] * MIB, free=0)

    def nvmlDeviceGetMigMode(self, h):
        self._check("mig_mode", h)
        mode = self.gpus[h].get("mig_mode")
        if mode is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        self._check("mig_count", h)
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, slot):
        self._check("mig_handle", h)
        slices = self.gpus[h].get("mig") or []
        if slot >= len(slices) or slices[slot] is None:  # an empty slot
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return (h, slot)

    def nvmlDeviceGetUtilizationRates(self, h):
        self._check("utilization", h)
        return SimpleNamespace(gpu=self.gpus[h]["util"], memory=0)

    # GPU performance monitoring (GPM): a sample is a real pynvml sample pointer whose address
    # numbers the sample; it remembers the GPU instance and the "busy" counter it was taken at.
    # A GPU's dict says whether it has GPM ("gpm") and each instance's GPU instance ("gi") and
    # utilisation in percent ("util"), which is what the metric between two samples reports.
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    NVML_GPM_METRIC_GRAPHICS_UTIL = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL
    NVML_SUCCESS = pynvml.NVML_SUCCESS

    def nvmlGpmQueryDeviceSupport(self, h):
        self._check("gpm_support", h)
        return SimpleNamespace(version=1, isSupportedDevice=int(self.gpus[h].get("gpm", False)))

    def nvmlDeviceGetGpuInstanceId(self, h):
        self._check("gpu_instance", h[0])
        return self._of(h)["gi"]

    def nvmlGpmSampleAlloc(self):
        self._check("gpm_alloc", 0)
        self.samples[len(self.taken) + 1] = None
        self.taken.append(None)
        return ctypes.cast(ctypes.c_void_p(len(self.taken)), pynvml.c_nvmlGpmSample_t)

    def nvmlGpmMigSampleGet(self, h, gi, sample):
        self._check("gpm_sample", h)
        self.samples[self._number(sample)] = gi
        return sample

    def nvmlGpmMetricsGet(self, got):
        self._check("gpm_metrics", 0)
        first, second = self._number(got.sample1), self._number(got.sample2)
        assert got.numMetrics == 1 and first < second, "two samples, in order"
        assert self.samples[first] == self.samples[second] is not None, "of one GPU instance"
        (util,) = {
            m["util"]
            for g in self.gpus
            for m in g.get("mig") or []
            if m and m["gi"] == self.samples[second]
        }
        got.metrics[0].nvmlReturn = pynvml.NVML_SUCCESS
        got.metrics[0].value = float(util)
        return got

    def nvmlGpmSampleFree(self, sample):
        del self.samples[self._number(sample)]  # a sample freed twice fails here

    @staticmethod
    def _number(sample) -> int:
        return ctypes.cast(sample, ctypes.c_void_p).value

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        self._check("processes", h)
        return self._procs(h)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h):
        self._check("processes_v2", h)
        return self._procs(h)

    def _procs(self, h):
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=None if mb is None else mb * MIB)
            for pid, mb in self.gpus[h]["procs"]
        ]


def two_gpus() -> list[dict]:
    return [
        {
            "name": "NVIDIA H100",
            "uuid": "GPU-aaa",
            "total": 81559,
            "used": 1200,
            "util": 37,
            "procs": [(os.getpid(), 1024)],
        },
        {
            "name": "NVIDIA H100",
            "uuid": "GPU-bbb",
            "total": 81559,
            "used": 0,
            "util": 0,
            "procs": [],
        },
    ]


def test_fake_nvml_only_uses_names_pynvml_has():
    used = [n for n in vars(FakeNvml) if n.startswith(("nvml", "NVML_", "c_nvml"))]
    assert "nvmlDeviceGetComputeRunningProcesses" in used
    for name in used:
        assert name.startswith("NVML_") or callable(getattr(pynvml, name)), name
        assert getattr(pynvml, name) is not None, name


# -- simulated ------------------------------------------------------------------------------


def test_simulated_inventory_lists_labelled_gpus_without_processes():
    inv = SimulatedInventory(3)
    gpus = inv.snapshot()
    assert inv.source == "simulated"
    assert [g.id for g in gpus] == ["0", "1", "2"]
    assert [g.index for g in gpus] == [0, 1, 2]
    for g in gpus:
        assert g.name == "Simulated GPU"
        assert g.node == socket.gethostname()
        assert (g.uuid, g.memory_total_mb, g.memory_used_mb, g.utilization) == (None,) * 4
        assert g.processes == []
    assert gpus[0].to_dict()["id"] == "0"
    assert SimulatedInventory(1, node="box7").snapshot()[0].node == "box7"


def test_simulated_inventory_needs_a_gpu():
    with pytest.raises(ValueError, match="at least 1"):
        SimulatedInventory(0)


def test_detect_with_simulated_gpus_asked_for():
    inv, source = detect(2)
    assert source == "simulated" == inv.source
    assert len(inv.snapshot()) == 2
    assert "2 simulated GPUs were asked for" in inv.reason
    with pytest.raises(ValueError):
        detect(-1)


# -- NVML, real ------------------------------------------------------------------------------


def test_detect_zero_falls_back_to_simulated_without_a_driver_and_says_why(caplog):
    caplog.set_level(logging.INFO, logger="jupyter_elastic_gpu")
    inv, source = detect(0)
    try:
        if nvml_works_here():
            assert source == "nvml" and len(inv.snapshot()) >= 1
            return
        assert source == "simulated"
        assert [g.id for g in inv.snapshot()] == [str(i) for i in range(FALLBACK_SIMULATED_GPUS)]
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        text = warnings[0].getMessage()
        assert "NVML could not start" in text and "is the NVIDIA driver loaded?" in text
        assert f"using {FALLBACK_SIMULATED_GPUS} simulated GPUs" in text
        assert inv.reason in text
    finally:
        inv.close()


def test_nvml_inventory_raises_one_readable_error_without_a_driver():
    if nvml_works_here():
        pytest.skip("NVML works on this machine")
    with pytest.raises(NvmlUnavailable, match=r"NVML could not start: .*Not Found") as err:
        NvmlInventory()
    assert isinstance(err.value.__cause__, pynvml.NVMLError)


def test_detect_without_nvidia_ml_py_falls_back_and_says_install_it():
    code = textwrap.dedent(
        """
        import logging, sys
        sys.modules["pynvml"] = None  # what `import pynvml` meets when it is not installed
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
        from jupyter_elastic_gpu.scheduler.execution.inventory import detect
        inv, source = detect(0)
        print(source, len(inv.snapshot()))
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["simulated", str(FALLBACK_SIMULATED_GPUS)]
    assert "jupyter_elastic_gpu.scheduler.execution.inventory WARNING" in res.stderr
    assert "nvidia-ml-py is not installed" in res.stderr
    assert "pip install nvidia-ml-py" in res.stderr


# -- NVML, through FakeNvml ------------------------------------------------------------------


def test_nvml_snapshot_reads_gpus_and_processes_with_owner_and_command():
    inv = NvmlInventory(node="box1", nvml=FakeNvml(two_gpus()))
    assert (inv.source, inv.count) == ("nvml", 2)
    a, b = inv.snapshot()
    assert (a.id, a.index, a.node, a.name, a.uuid) == ("0", 0, "box1", "NVIDIA H100", "GPU-aaa")
    assert (a.memory_total_mb, a.memory_used_mb, a.utilization) == (81559, 1200, 0.37)
    [proc] = a.processes
    assert (proc.pid, proc.user, proc.memory_mb) == (os.getpid(), ME, 1024)
    assert "pytest" in proc.command or "python" in proc.command
    assert (b.id, b.uuid, b.utilization, b.processes) == ("1", "GPU-bbb", 0.0, [])


def test_nvml_process_listed_twice_is_one_process_with_the_memory_added():
    gpus = two_gpus()
    gpus[0]["procs"] = [(os.getpid(), 100), (os.getpid(), 50), (os.getppid(), None)]
    [a, _] = NvmlInventory(nvml=FakeNvml(gpus)).snapshot()
    assert [(p.pid, p.memory_mb) for p in a.processes] == [(os.getpid(), 150), (os.getppid(), None)]


def test_nvml_errors_degrade_to_the_last_good_answer_and_warn_once(caplog):
    fake = FakeNvml(two_gpus())
    fake.gpus[1]["procs"] = [(os.getppid(), 5)]
    inv = NvmlInventory(nvml=fake)
    first = inv.snapshot()
    fake.gpus[0].update(used=5000, util=90, procs=[])
    fake.gpus[1].update(used=7, procs=[(os.getpid(), 1)])
    fake.fail[("memory", 0)] = pynvml.NVML_ERROR_GPU_IS_LOST
    fake.fail[("utilization", 0)] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fake.fail[("processes", 1)] = pynvml.NVML_ERROR_NO_PERMISSION
    caplog.set_level(logging.DEBUG, logger="jupyter_elastic_gpu")
    for _ in range(3):
        a, b = inv.snapshot()
        assert (a.memory_used_mb, a.utilization) == (first[0].memory_used_mb, 0.37)
        assert a.processes == []  # that call worked: the new (empty) answer
        assert b.memory_used_mb == 7  # that call worked
        assert [p.pid for p in b.processes] == [os.getppid()]  # the last good answer
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3  # one per GPU, call and error, however many snapshots
    assert any("memory failed on GPU 0" in w and "GPU is lost" in w for w in warnings)
    fake.fail.clear()
    assert inv.snapshot()[0].memory_used_mb == 5000  # recovers as soon as NVML answers


def test_nvml_errors_before_any_good_answer_give_unknowns_and_no_processes():
    fake = FakeNvml(two_gpus())
    fake.fail.update({(call, 0): pynvml.NVML_ERROR_UNKNOWN for call in ("name", "processes")})
    fake.fail[("handle", 1)] = pynvml.NVML_ERROR_GPU_IS_LOST
    inv = NvmlInventory(nvml=fake)
    a, b = inv.snapshot()
    assert (a.name, a.uuid, a.memory_used_mb, a.processes) == ("NVIDIA GPU", "GPU-aaa", 1200, [])
    assert (b.id, b.name, b.uuid, b.memory_total_mb, b.utilization) == (
        "1",
        "NVIDIA GPU",
        None,
        None,
        None,
    )
    fake.fail.clear()
    a, b = inv.snapshot()
    assert (a.name, b.name, b.uuid) == ("NVIDIA H100", "NVIDIA H100", "GPU-bbb")


def test_nvml_old_driver_without_v3_process_call_uses_v2():
    fake = FakeNvml(two_gpus())
    fake.fail[("processes", 0)] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    inv = NvmlInventory(nvml=fake)
    for _ in range(2):
        assert [p.pid for p in inv.snapshot()[0].processes] == [os.getpid()]
    assert fake.calls.count("processes") == 1  # remembered: v2 from then on
    assert fake.calls.count("processes_v2") == 4


def test_nvml_init_error_is_unavailable_and_close_shuts_down():
    with pytest.raises(NvmlUnavailable, match="Driver Not Loaded"):
        NvmlInventory(nvml=FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    fake = FakeNvml(two_gpus())
    inv = NvmlInventory(nvml=fake)
    inv.snapshot()
    inv.close()
    inv.close()
    assert fake.shut_down
    assert [g.id for g in inv.snapshot()] == ["0", "1"]  # the last answer, no NVML call


# -- processes -------------------------------------------------------------------------------


def test_process_helpers_read_proc():
    assert process_owner(os.getpid()) == ME
    command = process_command(os.getpid())
    assert "python" in command or "pytest" in command
    assert parent_pid(os.getpid()) == os.getppid()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert (process_owner(dead.pid), process_command(dead.pid), parent_pid(dead.pid)) == (
        None,
        None,
        None,
    )


@pytest.fixture
def process_tree():
    """A sidecar-like process with a child (like a trainer's worker), and an unrelated process."""
    code = (
        "import subprocess, sys, time\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    child = int(parent.stdout.readline())
    yield parent.pid, child, other.pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, 9)
    for p in (parent, other):
        p.kill()
        p.wait()


def test_external_processes_counts_descendants_of_our_pids_as_ours(process_tree):
    ours, child, other = process_tree

    def proc(pid):
        return GpuProcess(pid=pid, user=ME, memory_mb=10.0, command=None)

    def gpu(i, pids):
        return GpuInfo(str(i), i, "n", "g", None, None, None, None, [proc(p) for p in pids])

    infos = [gpu(0, [ours, child]), gpu(1, [other, child]), gpu(2, [])]
    found = external_processes(infos, {ours})
    assert {k: [p.pid for p in v] for k, v in found.items()} == {"0": [], "1": [other], "2": []}
    # The test process is the parent of both: with it among ours, nothing is external.
    assert external_processes(infos, {os.getpid()}) == {"0": [], "1": [], "2": []}
    # A pid that no longer exists cannot be traced to us: it is external.
    assert [p.pid for p in external_processes([gpu(0, [999_999_999])], {ours})["0"]] == [
        999_999_999
    ]


def test_in_a_container_our_trainer_seen_by_its_host_pid_keeps_its_gpu(process_tree):
    """NVML inside a container reports host pids, which do not exist in our pid namespace: on a
    GPU our job holds such a process is our trainer; on any other GPU it is someone else's."""
    ours, _, other = process_tree
    host_pid = 999_999_999
    infos = [
        GpuInfo(
            "0", 0, "n", "g", None, None, None, None, [GpuProcess(host_pid, None, 900.0, None)]
        ),
        GpuInfo(
            "1", 1, "n", "g", None, None, None, None, [GpuProcess(host_pid, None, 900.0, None)]
        ),
        GpuInfo("2", 2, "n", "g", None, None, None, None, [GpuProcess(other, ME, 10.0, None)]),
    ]
    found = external_processes(infos, {ours}, held={"0", "2"})
    # A visible process that is not ours stays external even on a GPU we hold.
    assert {k: [p.pid for p in v] for k, v in found.items()} == {
        "0": [],
        "1": [host_pid],
        "2": [other],
    }


# -- MIG --------------------------------------------------------------------------------------


def mig_gpus() -> list[dict]:
    """An H100 in MIG mode with three instances in slots 0, 2 and 3, and one without MIG."""
    a, b = two_gpus()
    a["mig_mode"] = pynvml.NVML_DEVICE_MIG_ENABLE
    a["procs"] = []
    a["gpm"] = True
    mig = {"name": "NVIDIA H100 MIG 3g.40gb", "uuid": "MIG-1", "total": 40192, "used": 100}
    a["mig"] = [
        {**mig, "gi": 2, "util": 55},
        None,
        {"name": "NVIDIA H100 MIG 1g.10gb", "uuid": "MIG-2", "total": 9984, "used": 0},
        {"name": "NVIDIA H100 MIG 1g.10gb", "uuid": "MIG-3", "total": 9984, "used": 0},
    ]
    a["mig"][2] |= {"gi": 9, "util": 0}
    a["mig"][3] |= {"gi": 10, "util": 12.5}
    return [a, b]


def test_a_gpu_in_mig_mode_lists_its_instances_and_is_never_placed_whole():
    from jupyter_elastic_gpu.scheduler import snapshot

    fake = FakeNvml(mig_gpus())
    inv = NvmlInventory(node="box", nvml=fake)
    first, second = inv.snapshot()
    assert first.kind == "H100" and first.mig is not None
    assert [(s.uuid, s.profile, s.memory_total_mb) for s in first.mig] == [
        ("MIG-1", "3g.40gb", 40192.0),
        ("MIG-2", "1g.10gb", 9984.0),
        ("MIG-3", "1g.10gb", 9984.0),
    ]
    assert second.mig is None  # no MIG: asked once, not at every snapshot
    inv.snapshot()
    assert fake.calls.count("mig_mode") == 3  # the MIG GPU twice, the other once
    snap = snapshot.build([], [first, second], {}, default_resize_cost_s=5.0)
    assert [g.id for g in snap.usable_gpus] == ["1"]


def test_a_mig_read_that_fails_keeps_the_last_good_layout(caplog):
    fake = FakeNvml(mig_gpus())
    inv = NvmlInventory(node="box", nvml=fake)
    before = inv.snapshot()[0].mig
    fake.fail[("mig_count", 0)] = pynvml.NVML_ERROR_UNKNOWN
    with caplog.at_level(logging.WARNING):
        after = inv.snapshot()[0].mig
    assert after == before
    assert "NVML MIG count failed on GPU 0" in caplog.text


def test_mig_utilisation_comes_from_gpm_samples_of_each_gpu_instance():
    """NVML's device utilisation is not supported in MIG mode: each instance's figure is GPM's
    graphics-engine activity between the last snapshot and this one (none at the first), and
    every sample NVML allocated is freed once replaced, gone, or at close."""
    gpus = mig_gpus()
    fake = FakeNvml(gpus)
    inv = NvmlInventory(node="box", nvml=fake)
    assert [s.utilization for s in inv.snapshot()[0].mig] == [None, None, None]
    assert [s.utilization for s in inv.snapshot()[0].mig] == [0.55, 0.0, 0.125]
    assert len(fake.samples) == 3  # the last of each instance, kept for the next figure
    gpus[0]["mig"][3] = None  # an instance destroyed (by an admin: never by us)
    assert [s.utilization for s in inv.snapshot()[0].mig] == [0.55, 0.0]
    assert len(fake.samples) == 2
    assert fake.calls.count("gpm_support") == 1  # asked once per GPU in MIG mode
    inv.close()
    assert fake.samples == {} and fake.shut_down


def test_mig_utilisation_is_not_made_up_without_gpm_or_when_a_read_fails(caplog):
    gpus = mig_gpus()
    gpus[0]["gpm"] = False  # an A100: MIG, no GPM
    fake = FakeNvml(gpus)
    inv = NvmlInventory(node="box", nvml=fake)
    for _ in range(2):
        assert [s.utilization for s in inv.snapshot()[0].mig] == [None, None, None]
    assert "gpm_alloc" not in fake.calls

    fake = FakeNvml(mig_gpus())
    inv = NvmlInventory(node="box", nvml=fake)
    inv.snapshot()
    fake.fail[("gpm_sample", 0)] = pynvml.NVML_ERROR_UNKNOWN
    with caplog.at_level(logging.WARNING):
        assert [s.utilization for s in inv.snapshot()[0].mig] == [None, None, None]
        assert [s.utilization for s in inv.snapshot()[0].mig] == [None, None, None]
    assert caplog.text.count("NVML MIG utilisation failed on GPU 0") == 1  # warned once
    del fake.fail[("gpm_sample", 0)]
    assert [s.utilization for s in inv.snapshot()[0].mig] == [0.55, 0.0, 0.125]
    assert len(fake.samples) == 3  # a failed sample is freed, the last good one kept
    inv.close()
    assert fake.samples == {}


def test_mig_utilisation_without_gpm_comes_from_a_dcgm_exporter(caplog):
    """An A100 in MIG mode (no GPM): each instance's figure is DCGM's for its GPU instance,
    read once per snapshot from the exporter's page (served here by a real HTTP server); an
    instance the page does not list, or an exporter that cannot be read, stays unknown."""
    from servers import PageServer

    from jupyter_elastic_gpu.scheduler.execution.dcgm import DcgmExporter

    gpus = mig_gpus()
    gpus[0]["gpm"] = False
    sample = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="GPU-aaa",GPU_I_ID="{}"}} {}\n'
    server = PageServer(sample.format(2, 0.5) + sample.format(10, 0.125))
    try:
        url = server.url
        fake = FakeNvml(gpus)
        inv = NvmlInventory(node="box", nvml=fake, dcgm=DcgmExporter(url))
        # at the first snapshot already (DCGM averages for us); MIG-2 (instance 9) not listed
        assert [s.utilization for s in inv.snapshot()[0].mig] == [0.5, None, 0.125]
        assert server.requests == 1  # one read for the three instances
        assert "gpm_alloc" not in fake.calls
        server.page = sample.format(9, 1.0)
        assert [s.utilization for s in inv.snapshot()[0].mig] == [None, 1.0, None]
        server.page = "not an exporter's page {"
        with caplog.at_level(logging.WARNING):
            assert [s.utilization for s in inv.snapshot()[0].mig] == [None, None, None]
        assert f"DCGM Exporter at {url} cannot be read" in caplog.text

        # a GPU that has GPM keeps GPM's figures: the exporter is not read for it
        asked = server.requests
        inv = NvmlInventory(node="box", nvml=FakeNvml(mig_gpus()), dcgm=DcgmExporter(url))
        inv.snapshot()
        assert [s.utilization for s in inv.snapshot()[0].mig] == [0.55, 0.0, 0.125]
        assert server.requests == asked
    finally:
        server.stop()
