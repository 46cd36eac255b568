"""The demo notebook as Binder runs it: how long it takes and the most memory it holds at once.

Binder gives a session a few GB of memory (mybinder.org: 2 GiB) and one or two CPU cores, and
ends the session above its memory limit. This starts a Jupyter server with Binder's settings
(binder/jupyter_server_config.py: four simulated GPUs), runs examples/elastic-training.ipynb
top to bottom in a kernel that finds that server, and samples the memory of every process
under this script (the server, its sidecars, trainers and their spare interpreters, the
kernel) as PSS: shared pages divided among their sharers, which is what a container's limit
charges (a sum of RSS would count TensorFlow's libraries once per process). Prints the wall
time, the peak, and the GPU counts the first job had over time (4, 2, 4 when the demo shows
its shrink and grow-back).

    python benchmarks/demo_footprint.py [--keep]
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat
from _common import REPO, command_line
from _servers import JupyterServer, finish
from nbclient import NotebookClient

from jupyter_elastic_gpu.options import Parser

DEMO = REPO / "examples" / "elastic-training.ipynb"
BINDER_LIMIT = 2 * 1024**3


def pss(pid: int) -> int:
    """Bytes ``pid`` accounts for, its shared pages divided among their sharers (0: gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (sidecars lead sessions of their own but stay its
    children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(children.get(pid, []))
    while todo:
        found.append(todo.pop())
        todo.extend(children.get(found[-1], []))
    return found


class Peak(threading.Thread):
    """The largest total PSS of the processes below ``pid`` (and ``pid`` itself when
    ``including``), sampled every 0.25 s until ``done`` is set; a context manager."""

    def __init__(self, pid: int, including: bool = False) -> None:
        super().__init__(daemon=True)
        self.pid, self.including = pid, including
        self.bytes = self.processes = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.25):
            procs = descendants(self.pid) + ([self.pid] if self.including else [])
            total = sum(pss(p) for p in procs)
            if total > self.bytes:
                self.bytes, self.processes = total, len(procs)

    def __enter__(self) -> Peak:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


def main() -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the run's folder")
    args = ap.parse_args()
    if not os.path.exists(f"/proc/{os.getpid()}/smaps_rollup"):
        sys.exit("demo_footprint: memory is read from /proc/PID/smaps_rollup (Linux 4.14+)")
    root = Path(tempfile.mkdtemp(prefix="demo-footprint-"))
    server = JupyterServer(root, config={"simulated_gpus": 4})
    peak = Peak(os.getpid())  # the server and the kernel are this script's children
    try:
        server.start()
        os.environ.update(
            ELASTIC_GPU_URL=f"http://127.0.0.1:{server.port}/",
            ELASTIC_GPU_TOKEN=server.token,
            TF_CPP_MIN_LOG_LEVEL="2",
        )
        nb = nbformat.read(DEMO, as_version=4)
        peak.start()
        t0 = time.monotonic()
        NotebookClient(nb, timeout=900, resources={"metadata": {"path": str(root)}}).execute()
        wall = time.monotonic() - t0
    finally:
        peak.done.set()
        finish(server, [], root, args.keep)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if "text" in o)
    counts = re.search(r"GPU counts over time: (\[[\d, ]*\])", text)
    print(command_line())
    print(f"demo notebook: {wall:.0f} s wall")
    print(
        f"peak memory: {peak.bytes / 1024**3:.2f} GiB (PSS) in {peak.processes} processes; "
        f"mybinder.org allows {BINDER_LIMIT / 1024**3:.0f} GiB"
    )
    print(f"the first job's GPU counts: {counts.group(1) if counts else 'not printed'}")
    for line in text.splitlines():  # the notebook's last cell: each job's events
        if re.match(r"\s+\d+\.\d s  \w+ - ", line) or (line.endswith(":") and " " not in line):
            print(line)
    return 0 if peak.bytes < BINDER_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
