"""What large request bodies do to the shared scheduler's memory.

Starts a real `jupyter elastic-gpu scheduler` (a subprocess, its own state folder, 4 simulated
GPUs), adds a user, and sends ``--posts`` concurrent `POST jobs` of ``--mb`` MB each (a valid
submission whose bulk is a passed variable, with its Content-Length, from urllib as the CLI
sends it). Prints the daemon's resident memory idle and its peak (``VmRSS``, ``VmHWM`` from
/proc), each answer's status and the seconds until it came.

    python benchmarks/large_bodies.py [--posts 4] [--mb 181]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from _common import command_line, whole
from _servers import free_port

from jupyter_elastic_gpu.options import Parser


def memory_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise LookupError(field)


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "scheduler", *args], **kwargs
    )


def main() -> int:
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--posts", type=whole(), default=4, help="concurrent large submissions")
    ap.add_argument("--mb", type=whole(), default=181, help="size of each body (MB)")
    args = ap.parse_args()
    print(f"$ {command_line()}\n")
    root = Path(tempfile.mkdtemp(prefix="elastic-gpu-large-bodies-"))
    state, port = root / "state", free_port()
    added = cli("add-user", "ann", "--state-dir", str(state), capture_output=True, text=True)
    token = added.stdout.split("token=", 1)[-1].strip()
    url = f"http://127.0.0.1:{port}/elastic-gpu/api/"
    with open(root / "daemon.log", "ab") as log:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "jupyter_elastic_gpu.cli", "scheduler", "--port", str(port),
             "--state-dir", str(state), "--simulated-gpus", "4",
             "--SchedulerDaemonApp.discovery=False"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "whoami", timeout=2)
            except urllib.error.HTTPError:
                break  # up: it asks for a token
            except OSError:
                if time.monotonic() > deadline or daemon.poll() is not None:
                    raise SystemExit("the scheduler did not start: see " + str(root)) from None
                time.sleep(0.2)
        idle = memory_mb(daemon.pid, "VmRSS")
        body = json.dumps(
            {
                "kind": "synthetic",
                "synthetic": {"work": 100, "throughput": {"1": 10}},
                "inputs": {"x_train": "A" * (args.mb * 2**20)},
            }
        ).encode()
        answers: list[tuple] = []

        def post() -> None:
            request = urllib.request.Request(
                url + "jobs", data=body, method="POST", headers={"Authorization": f"token {token}"}
            )
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=300) as r:
                    status = r.status
            except urllib.error.HTTPError as e:
                status = e.code
            except OSError as e:
                status = f"no answer ({type(e).__name__})"
            answers.append((status, time.monotonic() - t0))

        threads = [threading.Thread(target=post) for _ in range(args.posts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = memory_mb(daemon.pid, "VmHWM")
        now = memory_mb(daemon.pid, "VmRSS")
    finally:
        daemon.terminate()
        daemon.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    statuses = Counter(str(s) for s, _ in answers)
    slowest = max(t for _, t in answers)
    print(f"{args.posts} concurrent POST jobs of {args.mb} MB to the shared scheduler\n")
    print(f"{'idle MB':>8} {'peak MB':>8} {'after MB':>9} {'peak/idle':>10}  answers")
    print(
        f"{idle:>8.0f} {peak:>8.0f} {now:>9.0f} {peak / idle:>10.2f}  "
        + ", ".join(f"{n} x {s}" for s, n in statuses.items())
        + f" (the last after {slowest:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
