"""Kernel specs that use the provisioner: "Python 3 (1 GPU)" and the like, and a plain one.

``jupyter elastic-gpu kernelspec install --gpus N`` writes a copy of this Python's ipykernel
spec whose ``metadata.kernel_provisioner`` names ``elastic-gpu-provisioner`` with ``gpus`` N,
so every jupyter_client user (JupyterLab's launcher, nbclient, papermill, Voila) offers it and
honours it. ``--gpus 0 --name python3`` replaces the default Python kernel by one that sees no
GPU, which covers the tools that never read the server's settings; ``--mig 1g.10gb`` writes
"Python 3 (1g.10gb MIG slice)", whose kernels lease one MIG instance of that profile.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from typing import Any

from ..core.slices import check_profile
from . import PROVISIONER_NAME


def spec_name(gpus: int, mig: str | None = None) -> str:
    if mig:
        return f"python3-mig-{mig.replace('+', '-')}"
    return f"python3-gpu{gpus}" if gpus else "python3-nogpu"


def display_name(gpus: int, mig: str | None = None) -> str:
    if mig:
        return f"Python 3 ({mig} MIG slice)"
    if not gpus:
        return "Python 3 (no GPU)"
    return f"Python 3 ({gpus} GPU{'' if gpus == 1 else 's'})"


def kernel_json(
    gpus: int,
    python: str = sys.executable,
    admission_timeout: float | None = None,
    mig: str | None = None,
) -> dict:
    """The kernel.json of a Python kernel with ``gpus`` leased GPUs (0: none visible), or
    with one MIG slice of profile ``mig``."""
    config: dict[str, Any] = {"gpus": 1, "mig": mig} if mig else {"gpus": gpus}
    if admission_timeout is not None:
        config["admission_timeout"] = admission_timeout
    return {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name(gpus, mig),
        "language": "python",
        "metadata": {
            "debugger": True,
            "kernel_provisioner": {"provisioner_name": PROVISIONER_NAME, "config": config},
            "elastic_gpu": {"gpus": config["gpus"]} | ({"mig": mig} if mig else {}),
        },
    }


def install(
    gpus: int,
    name: str | None = None,
    user: bool = False,
    prefix: str | None = None,
    admission_timeout: float | None = None,
    mig: str | None = None,
) -> str:
    """Install the spec; returns the folder it went to. Default: this environment's prefix
    (``sys.prefix``), where this Python's kernels belong."""
    from jupyter_client.kernelspec import KernelSpecManager

    if gpus < 0:
        raise ValueError("--gpus must be 0 or more")
    if mig:
        mig = check_profile(mig)
    name = name or spec_name(gpus, mig)
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, name)
        os.makedirs(folder)
        with open(os.path.join(folder, "kernel.json"), "w") as f:
            json.dump(kernel_json(gpus, admission_timeout=admission_timeout, mig=mig), f, indent=1)
        _copy_logos(folder)
        if prefix is None and not user:
            prefix = sys.prefix
        return KernelSpecManager().install_kernel_spec(
            folder, kernel_name=name, user=user, prefix=prefix, replace=True
        )


def _copy_logos(folder: str) -> None:
    try:
        from ipykernel.kernelspec import RESOURCES
    except ImportError:
        return
    for logo in ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg"):
        path = os.path.join(RESOURCES, logo)
        if os.path.exists(path):
            shutil.copy(path, folder)


def add_kernelspec(sub: Any) -> None:
    p = sub.add_parser(
        "kernelspec",
        help="install a Python kernel spec that leases N GPUs (or sees none)",
        description="Install a kernel spec whose kernels lease GPUs from the scheduler "
        "(docs/interactive-gpus.md).",
    )
    p.add_argument("action", choices=["install"])
    p.add_argument("--gpus", type=int, default=1, help="GPUs its kernels lease (0: none visible)")
    p.add_argument(
        "--mig",
        metavar="PROFILE",
        help="its kernels lease one MIG slice of this profile (1g.10gb) instead of GPUs",
    )
    p.add_argument(
        "--name", help="spec name (default python3-gpuN, python3-nogpu or python3-mig-PROFILE)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user only")
    where.add_argument("--prefix", help="install under this prefix (default: this environment)")
    p.add_argument(
        "--admission-timeout", type=float, help="seconds a start waits for the lease (default 120)"
    )

    def run(args: argparse.Namespace) -> int:
        try:
            path = install(
                args.gpus, args.name, args.user, args.prefix, args.admission_timeout, args.mig
            )
        except ValueError as e:
            print(f"jupyter elastic-gpu kernelspec: {e}", file=sys.stderr)
            return 2
        print(
            f"installed {display_name(args.gpus, args.mig and check_profile(args.mig))!r} in {path}"
        )
        return 0

    p.set_defaults(func=run)
