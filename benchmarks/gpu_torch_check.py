"""A PyTorch job on real NVIDIA GPUs: does each rank see its GPU, does NCCL join them, and how
long is a resize's pause?

An unmodified torchrun-style DDP script (NCCL, a DistributedSampler, its own checkpoint on
SIGTERM) runs through the sidecar with the torchrun adapter. With two or more GPUs the job
moves 1 -> 2 -> 1 GPUs; with one it trains on it and is cancelled (two NCCL ranks cannot share
one GPU). Every rank writes what it sees: its world size, ``torch.cuda.device_count()``, its
device and the sum of an all-reduce of ones over NCCL; the check is that each generation's
ranks see exactly the GPUs of its grant, one each, and that the all-reduce adds up. It prints
the resize pauses and the steps lost (none: the script saves at the step the ranks stop after).

On a machine without an NVIDIA GPU, or with a torch built without CUDA, it says why and exits 0.

    python benchmarks/gpu_torch_check.py [--settle 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import positive, sidecar_env, wait_first

WORKLOAD = """
import json, os, signal, sys
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

out = sys.argv[1]
rank, local, world = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
torch.cuda.set_device(local)
dist.init_process_group("nccl")
ones = torch.ones(1, device="cuda")
dist.all_reduce(ones)
seen = {"rank": rank, "world": world, "cuda_devices": torch.cuda.device_count(),
        "device": torch.cuda.get_device_name(local), "all_reduce": ones.item(),
        "backend": dist.get_backend(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
with open(os.path.join(out, "seen.jsonl"), "a") as f:
    f.write(json.dumps(seen) + "\\n")
g = torch.Generator().manual_seed(1)
x = torch.randn(65536, 1024, generator=g)
y = x @ torch.randn(1024, 1, generator=g)
data = TensorDataset(x, y)
sampler = DistributedSampler(data, num_replicas=world, rank=rank, seed=0)
loader = DataLoader(data, batch_size=512 // world, sampler=sampler)
model = DistributedDataParallel(nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(6)],
                                              nn.Linear(1024, 1)).cuda(), device_ids=[local])
opt = torch.optim.Adam(model.parameters(), 1e-4)
ckpt, step = os.path.join(out, "ckpt.pt"), 0
if os.path.exists(ckpt):
    state = torch.load(ckpt, map_location="cuda")
    model.module.load_state_dict(state["model"]); opt.load_state_dict(state["opt"])
    step = state["step"]
stopping = False
signal.signal(signal.SIGTERM, lambda *a: globals().__setitem__("stopping", True))
while True:
    epoch, skip = divmod(step, len(loader))
    sampler.set_epoch(epoch)
    for i, (xb, yb) in enumerate(loader):
        if i < skip:
            continue
        if stopping:
            if rank == 0:
                torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                            "step": step}, ckpt + ".tmp")
                os.replace(ckpt + ".tmp", ckpt)
            sys.exit(0)
        loss = nn.functional.mse_loss(model(xb.cuda()), yb.cuda())
        opt.zero_grad(); loss.backward(); opt.step()
        step += 1
"""


def skip(reason: str) -> int:
    print(f"gpu_torch_check: skipped: {reason}")
    return 0


def cuda_gpus() -> tuple[int, str]:
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return 0, f"torch did not answer ({e})"
    if res.returncode != 0:
        return 0, "torch is not installed here: pip install 'jupyter-elastic-gpu[torch]'"
    n = int(res.stdout.strip().splitlines()[-1])
    if n == 0:
        return 0, "torch sees no CUDA GPU (no NVIDIA GPU, or a CPU build of torch)"
    return n, ""


def run(work: Path, grants: list[str], settle: float) -> tuple[dict, list[dict]]:
    job, out = work / "job", work / "out"
    out.mkdir()
    cli = [sys.executable, "-m", "elastic_gpu_sidecar"]
    cmd = [*cli, "run", "--job-dir", str(job), "--gpus", grants[0], "--quiet"]
    cmd += ["--framework", "torchrun", "--", str(work / "workload.py"), str(out)]
    print("$", " ".join(shlex.quote(c) for c in cmd), flush=True)
    env = sidecar_env()
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        for gen, grant in enumerate(grants[1:], start=1):
            wait_first(job, gen, proc)
            time.sleep(settle)
            subprocess.run(
                [*cli, "resize", "--job-dir", str(job), "--gpus", grant],
                env=env,
                check=True,
                capture_output=True,
            )
        wait_first(job, len(grants), proc)
        time.sleep(settle)
        subprocess.run(
            [*cli, "cancel", "--job-dir", str(job), "--wait"],
            env=env,
            check=True,
            capture_output=True,
        )
        proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    status = json.loads((job / "status.json").read_text())
    seen = [json.loads(line) for line in (out / "seen.jsonl").read_text().splitlines()]
    return status, seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settle", type=positive, default=10.0, help="seconds of training per grant")
    args = ap.parse_args()
    n, why = cuda_gpus()
    if n == 0:
        return skip(why)
    grants = ["0", "0,1", "0"] if n >= 2 else ["0"]
    print(f"{n} GPU(s): {'resizing 1 -> 2 -> 1 GPUs' if n >= 2 else 'one GPU, no resize'}\n")
    work = Path(tempfile.mkdtemp(prefix="elastic-gpu-torch-check-"))
    (work / "workload.py").write_text(WORKLOAD)
    status, seen = run(work, grants, args.settle)
    ok = True
    sizes = [len(g.split(",")) for g in grants]
    starts = [s for s in seen if s["rank"] == 0]
    for size, start in zip(sizes, starts, strict=False):
        print(f"  generation on {size} GPU(s): {start}")
    if [s["world"] for s in starts] != sizes:
        print(f"  FAIL: world sizes {[s['world'] for s in starts]}, expected {sizes}")
        ok = False
    for s in seen:
        good = s["cuda_devices"] == s["world"] and s["all_reduce"] == s["world"]
        if not good or s["backend"] != "nccl":
            print(f"  FAIL: rank {s['rank']} of {s['world']} saw {s}")
            ok = False
    print(f"\n{'resize':>8}{'pause s':>10}{'lost steps':>12}")
    for r in status["resizes"]:
        pause = r["pause_s"]
        print(
            f"{len(r['from_gpus'])}->{len(r['to_gpus'])}".rjust(8)
            + (f"{pause:.2f}" if pause is not None else "None").rjust(10)
            + str(r["lost_steps"]).rjust(12)
        )
        ok &= pause is not None and r["lost_steps"] == 0
    print("\nresult:", "OK" if ok else "FAILED", f"(job dir in {work})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
