"""Notebook kernels on a real NVIDIA machine: a plain kernel allocates nothing on any GPU, a
leased one only on its own; where a GPU is in MIG mode, a kernel leasing one of its instances
sees that instance only.

Starts a Jupyter server with the extension (GPUs from NVML) and two kernels through its REST
API, as JupyterLab does: a plain "Python 3" and a "Python 3 (1 GPU)". Each imports TensorFlow
and computes something small; then NVML's compute processes say on which GPUs each kernel
holds memory. Checks: the plain kernel lists no GPU in TensorFlow and appears on no GPU; the
leased kernel lists exactly one and appears only on the GPU of its lease; a "Python 3 (PROFILE
MIG slice)" kernel (for a profile the first GPU in MIG mode has) gets CUDA_VISIBLE_DEVICES=
MIG-<uuid> of its lease and lists one GPU. Read only: it never changes a GPU's settings or MIG
layout. Prints each check and exits 1 when one fails.

On a machine without an NVIDIA GPU (no driver, no nvidia-ml-py) it says why and exits 0.

    python benchmarks/gpu_kernel_check.py [--keep]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.request
from importlib.metadata import entry_points
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _servers import JupyterServer, finish

from jupyter_elastic_gpu.kernels import PROVISIONER_NAME
from jupyter_elastic_gpu.kernels.specs import kernel_json, spec_name
from jupyter_elastic_gpu.options import Parser
from jupyter_elastic_gpu.scheduler.execution.inventory import NvmlInventory, NvmlUnavailable

ROOT = Path(__file__).resolve().parents[1]
CODE = (
    "import os, json, tensorflow as tf\n"
    "x = tf.reduce_sum(tf.random.normal((512, 512)))\n"
    "print(json.dumps({'pid': os.getpid(), 'cuda': os.environ.get('CUDA_VISIBLE_DEVICES'),"
    " 'gpus': [d.name for d in tf.config.list_logical_devices('GPU')], 'x': float(x)}))"
)


def environment(root: Path, mig: str | None) -> dict[str, str]:
    """Kernel specs 'Python 3 (1 GPU)' and, where a GPU is in MIG mode, 'Python 3 (PROFILE MIG
    slice)' for one of its instances' profiles, in a data folder of this run's own."""
    for name, spec in [
        (spec_name(1), kernel_json(1, python=sys.executable)),
        *([(spec_name(1, mig), kernel_json(1, python=sys.executable, mig=mig))] if mig else []),
    ]:
        folder = root / "data" / "kernels" / name
        folder.mkdir(parents=True)
        (folder / "kernel.json").write_text(json.dumps(spec))
    paths = [str(ROOT), str(ROOT / "sidecar")]
    if not any(
        ep.name == PROVISIONER_NAME
        for ep in entry_points(group="jupyter_client.kernel_provisioners")
    ):
        sys.exit(
            "gpu_kernel_check: install the package first (pip install -e .): its kernel "
            "provisioner is registered as an entry point"
        )
    return {
        "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
        "JUPYTER_PATH": str(root / "data"),
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }


def run(server: JupyterServer, kernel_id: str, code: str) -> dict:
    from jupyter_client.blocking import BlockingKernelClient

    kc = BlockingKernelClient(
        connection_file=str(server.root / "runtime" / f"kernel-{kernel_id}.json")
    )
    kc.load_connection_file()
    kc.start_channels(hb=False)
    out: list[str] = []
    try:
        kc.wait_for_ready(timeout=120)

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        kc.execute_interactive(code, timeout=300, output_hook=hook)
    finally:
        kc.stop_channels()
    text = "".join(out).strip().splitlines()
    try:
        return json.loads(text[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"the kernel did not answer: {''.join(out)[-2000:]}") from None


def start_kernel(server: JupyterServer, name: str) -> str:
    """A kernel started through Jupyter's own REST API, as JupyterLab starts one."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/api/kernels",
        data=json.dumps({"name": name}).encode(),
        method="POST",
        headers={"Authorization": f"token {server.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as r:
        return json.loads(r.read())["id"]


def gpus_of(pid: int) -> list[str]:
    inv = NvmlInventory()
    try:
        return [g.id for g in inv.snapshot() if any(p.pid == pid for p in g.processes)]
    finally:
        inv.close()


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the run's folder")
    args = parser.parse_args(argv)
    try:
        inv = NvmlInventory()
    except NvmlUnavailable as e:
        print(f"gpu_kernel_check: skipped: no NVIDIA GPU here ({e})")
        return 0
    count = inv.count
    slices = [(g.id, s) for g in inv.snapshot() for s in g.mig or ()]
    inv.close()
    if count == 0:
        print("gpu_kernel_check: skipped: NVML works but finds no GPU")
        return 0
    mig = slices[0][1].profile if slices else None

    root = Path(tempfile.mkdtemp(prefix="gpu-kernel-check-"))
    server = JupyterServer(root, env=environment(root, mig))
    failures = 0

    def check(ok: bool, what: str) -> None:
        nonlocal failures
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {what}")

    try:
        server.start()
        print(f"{count} GPU(s); server log {server.log_path}\n")
        plain = start_kernel(server, "python3")
        seen = run(server, plain, CODE)
        time.sleep(2)  # NVML lists a process once its context exists
        print(f"plain kernel: {seen}")
        check(seen["cuda"] == "-1", "plain kernel: CUDA_VISIBLE_DEVICES=-1")
        check(seen["gpus"] == [], "plain kernel: TensorFlow lists no GPU")
        check(gpus_of(seen["pid"]) == [], "plain kernel: on no GPU per NVML")

        leased = start_kernel(server, spec_name(1))
        seen = run(server, leased, CODE)
        time.sleep(2)
        lease = next(j for j in server.get("jobs")["jobs"] if j.get("kind") == "interactive")
        on = gpus_of(seen["pid"])
        print(f"leased kernel: {seen}; lease {lease['id']} on GPU(s) {lease['gpus']}; NVML: {on}")
        check(len(seen["gpus"]) == 1, "leased kernel: TensorFlow lists exactly one GPU")
        check(on == lease["gpus"], "leased kernel: on its lease's GPU only, per NVML")

        if mig is None:
            print(
                "\nMIG: no GPU is in MIG mode here, so the slice check is skipped (an admin "
                "enables it with nvidia-smi; this check never changes a GPU's settings)"
            )
        else:
            sliced = start_kernel(server, spec_name(1, mig))
            seen = run(server, sliced, CODE)
            time.sleep(2)
            (lease,) = [
                j
                for j in server.get("jobs")["jobs"]
                if j.get("kind") == "interactive" and j.get("mig") == mig
            ]
            parent = {s.uuid: gpu for gpu, s in slices}.get(lease["gpus"][0])
            on = gpus_of(seen["pid"])
            print(f"MIG kernel: {seen}; lease {lease['id']} on {lease['gpus']}; NVML: {on}")
            check(seen["cuda"] == lease["gpus"][0], f"MIG kernel: CUDA sees its {mig} slice only")
            check(len(seen["gpus"]) == 1, "MIG kernel: TensorFlow lists exactly one GPU")
            check(on in ([], [parent]), "MIG kernel: on no GPU but its slice's, per NVML")
    finally:
        finish(server, [], root, args.keep)
    print(f"\n{'all checks passed' if not failures else f'{failures} check(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
