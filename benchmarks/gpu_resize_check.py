"""The sidecar's resize on real NVIDIA GPUs: does it work, and how long is the pause?

With two or more GPUs the job moves 1 -> 2 -> 1 GPUs (CUDA_VISIBLE_DEVICES); with a single
GPU it moves 1 -> 2 logical GPUs on that GPU (tf.config.set_logical_device_configuration,
which the sidecar does when a GPU id is listed twice: ``--gpus 0,0``) and back. It runs the
resize with the standby interpreter (the default) and with a fresh process, checks that the
trainer saw exactly the devices it was granted, and prints the pauses.

On a machine without an NVIDIA GPU, or with a TensorFlow built without CUDA, it says why and
exits 0.

    python benchmarks/gpu_resize_check.py [--settle 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import positive, progress_records, sidecar_env, wait_first

WORKLOAD = """
import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(65536, 256)).astype("float32")
y = (x @ rng.normal(size=(256, 1))).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(8192, seed=1).batch(512).prefetch(4)
model = keras.Sequential([keras.Input((256,))] + [keras.layers.Dense(2048, activation="relu")
                                                    for _ in range(4)] + [keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="mse")
model.fit(ds, epochs=10000, verbose=0)
"""


def skip(reason: str) -> int:
    print(f"gpu_resize_check: skipped: {reason}")
    return 0


def gpu_count() -> tuple[int, str]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0, "no NVIDIA GPU here (nvidia-smi not found)"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return 0, f"nvidia-smi failed ({e})"
    n = len([line for line in out.splitlines() if line.startswith("GPU ")])
    if n == 0:
        return 0, "nvidia-smi lists no GPU (driver not loaded?)"
    code = "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    seen = int(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else 0
    if seen == 0:
        return 0, (
            f"{n} GPU(s) present but TensorFlow sees none (tensorflow-cpu, or no CUDA "
            "libraries): pip install 'tensorflow[and-cuda]'"
        )
    return n, ""


def run_case(work: Path, name: str, grants: list[str], extra: list[str], settle: float) -> dict:
    job = work / name
    cli = [sys.executable, "-m", "elastic_gpu_sidecar"]
    cmd = [
        *cli,
        "run",
        "--job-dir",
        str(job),
        "--gpus",
        grants[0],
        "--quiet",
        *extra,
        "--",
        str(work / "workload.py"),
    ]
    print("$", " ".join(shlex.quote(c) for c in cmd), flush=True)
    proc = subprocess.Popen(
        cmd,
        env=sidecar_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for gen, grant in enumerate(grants[1:], start=1):
            wait_first(job, gen, proc)
            time.sleep(settle)
            subprocess.run(
                [*cli, "resize", "--job-dir", str(job), "--gpus", grant],
                env=sidecar_env(),
                check=True,
                capture_output=True,
            )
        wait_first(job, len(grants), proc)
        subprocess.run(
            [*cli, "cancel", "--job-dir", str(job), "--wait"],
            env=sidecar_env(),
            check=True,
            capture_output=True,
        )
        proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    status = json.loads((job / "status.json").read_text())
    log = (job / "trainer.log").read_text()
    devices = re.findall(r"(MirroredStrategy over .*|default strategy on 1 device .*)", log)
    replicas = {r["generation"]: r["replicas"] for r in progress_records(job)}
    return {
        "resizes": status["resizes"],
        "devices": devices,
        "replicas": replicas,
        "expected": {g + 1: len(grant.split(",")) for g, grant in enumerate(grants)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settle", type=positive, default=10.0, help="seconds of training per grant")
    args = ap.parse_args()
    n, why = gpu_count()
    if n == 0:
        return skip(why)
    grants = ["0", "0,1", "0"] if n >= 2 else ["0", "0,0", "0"]
    what = "1 -> 2 GPUs -> 1" if n >= 2 else "1 GPU -> 2 logical GPUs on GPU 0 -> 1"
    print(f"{n} GPU(s): resizing {what}\n")
    work = Path(tempfile.mkdtemp(prefix="elastic-gpu-check-"))
    (work / "workload.py").write_text(WORKLOAD)
    ok = True
    rows = []
    for name, extra in (("standby", []), ("fresh", ["--no-standby"])):
        res = run_case(work, name, grants, extra, args.settle)
        for line in res["devices"]:
            print(f"  [{name}] trainer: {line}")
        if res["replicas"] != res["expected"]:
            print(
                f"  [{name}] FAIL: replicas per generation {res['replicas']}, "
                f"expected {res['expected']}"
            )
            ok = False
        for r in res["resizes"]:
            rows.append(
                (name, f"{len(r['from_gpus'])}->{len(r['to_gpus'])}", r["pause_s"], r["lost_steps"])
            )
            ok &= r["pause_s"] is not None and r["lost_steps"] == 0
    print(f"\n{'mechanism':<10}{'resize':>8}{'pause s':>10}{'lost steps':>12}")
    for name, resize, pause, lost in rows:
        print(f"{name:<10}{resize:>8}{pause if pause is None else f'{pause:.2f}':>10}{lost!s:>12}")
    print("\nresult:", "OK" if ok else "FAILED", f"(job dirs in {work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
