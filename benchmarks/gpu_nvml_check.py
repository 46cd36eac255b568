"""The GPU inventory on a real NVIDIA machine: what NVML reports, and what a snapshot costs.

Prints each GPU (index = the id the scheduler uses, UUID, memory, utilisation, its kind, MIG
mode and MIG instances with their utilisation from GPM where NVML has it: read only, nothing
is changed) with the compute processes on it (pid, owner, memory, command line), which of them
the scheduler would count as "outside the scheduler" when it has started nothing, and the
time of the first and of the following snapshots (the service takes one every few seconds, in a
worker thread).

On a machine without an NVIDIA GPU (no nvidia-ml-py, no driver, or NVML finds no GPU) it says
why and exits 0.

    python benchmarks/gpu_nvml_check.py [--repeat 50]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.scheduler.execution.inventory import (
    NvmlInventory,
    NvmlUnavailable,
    external_processes,
    gpm_busy,
)


def skip(reason: str) -> int:
    print(f"gpu_nvml_check: skipped: {reason}")
    return 0


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "?" if value is None else f"{value:.{digits}f}{unit}"


def gpm_check(index: int, seconds: float = 0.5) -> str:
    """Whether GPU ``index`` has GPU performance monitoring, and its graphics activity over
    ``seconds`` from two whole-GPU samples: the metric the inventory reads for each MIG
    instance (``gpm_busy``), checked on a GPU with MIG off (with MIG on, each instance's line
    shows the inventory's own figure)."""
    import pynvml

    pynvml.nvmlInit()
    samples = []
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        try:
            if not pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                return "GPM not supported (MIG instances' utilisation is not reported)"
        except (pynvml.NVMLError, AttributeError) as e:
            return f"GPM not available ({e}): MIG instances' utilisation is not reported"
        for _ in range(2):
            samples.append(pynvml.nvmlGpmSampleAlloc())
            pynvml.nvmlGpmSampleGet(handle, samples[-1])
            time.sleep(seconds)  # two samples apart: what the metric is worked out between
        busy = gpm_busy(pynvml, samples[0], samples[1])
        return f"GPM supported; graphics activity {fmt(None if busy is None else busy * 100, '%')}"
    except pynvml.NVMLError as e:
        return f"GPM read failed: {e}"
    finally:
        for sample in samples:
            pynvml.nvmlGpmSampleFree(sample)
        pynvml.nvmlShutdown()


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="snapshots to time (default 50)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat: must be a whole number of at least 1, got {args.repeat}")

    t0 = time.perf_counter()
    try:
        inv = NvmlInventory()
    except NvmlUnavailable as e:
        return skip(f"no NVIDIA GPU here ({e})")
    init_s = time.perf_counter() - t0
    try:
        if inv.count == 0:
            return skip("NVML works but finds no GPU")
        t0 = time.perf_counter()
        gpus = inv.snapshot()
        first_s = time.perf_counter() - t0
        times = []
        for _ in range(max(args.repeat, 1)):
            t0 = time.perf_counter()
            last = inv.snapshot()
            times.append(time.perf_counter() - t0)
    finally:
        inv.close()

    print(f"node {inv.node}: {len(gpus)} GPU(s) from NVML\n")
    for g in gpus:
        print(
            f"GPU {g.id} (index {g.index}) {g.name}  {g.uuid}\n"
            f"    memory {fmt(g.memory_used_mb)} / {fmt(g.memory_total_mb)} MiB, "
            f"utilisation {fmt(None if g.utilization is None else g.utilization * 100, '%')}\n"
            f"    kind {g.kind}, MIG "
            + ("off (or not supported)" if g.mig is None else f"on, {len(g.mig)} instance(s)")
            + ("" if g.mig is not None else f"\n    {gpm_check(g.index)}")
        )
        # an instance's utilisation needs two snapshots (GPM samples): the last one's
        utilisation = {s.uuid: s.utilization for x in last if x.id == g.id for s in x.mig or ()}
        for s in g.mig or ():
            busy = utilisation.get(s.uuid)
            print(
                f"    MIG {s.profile:<10} {s.uuid}  memory {fmt(s.memory_used_mb)} / "
                f"{fmt(s.memory_total_mb)} MiB, utilisation "
                + ("not reported (no GPM)" if busy is None else fmt(busy * 100, "%"))
            )
        if not g.processes:
            print("    no compute processes")
        for p in g.processes:
            print(
                f"    pid {p.pid:>8}  {p.user or '?':<12} {fmt(p.memory_mb, ' MiB'):>10}  "
                f"{p.command or '?'}"
            )
    outside = external_processes(gpus, our_pids=set())
    n_outside = sum(len(v) for v in outside.values())
    print(f"\nprocesses outside the scheduler (it has started none here): {n_outside}")
    print(
        f"\nNVML init {init_s * 1000:.1f} ms; first snapshot {first_s * 1000:.2f} ms; "
        f"next {len(times)} snapshots: median {statistics.median(times) * 1000:.2f} ms, "
        f"max {max(times) * 1000:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
