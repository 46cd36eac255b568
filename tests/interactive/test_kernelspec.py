"""``jupyter elastic-gpu kernelspec install``: the specs a launcher offers, written where
jupyter_client finds them, and a bad value refused before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys


def install(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "kernelspec", "install", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_a_mig_spec_leases_one_slice_of_its_profile(tmp_path):
    done = install(tmp_path, "--mig", "1G.10GB", "--prefix", str(tmp_path / "env"))
    assert done.returncode == 0, done.stderr
    assert "installed 'Python 3 (1g.10gb MIG slice)'" in done.stdout
    spec = json.loads(
        (tmp_path / "env/share/jupyter/kernels/python3-mig-1g.10gb/kernel.json").read_text()
    )
    assert spec["display_name"] == "Python 3 (1g.10gb MIG slice)"
    provisioner = spec["metadata"]["kernel_provisioner"]
    assert provisioner["provisioner_name"] == "elastic-gpu-provisioner"
    assert provisioner["config"] == {"gpus": 1, "mig": "1g.10gb"}


def test_a_name_that_is_no_mig_profile_is_refused_and_nothing_written(tmp_path):
    done = install(tmp_path, "--mig", "big", "--prefix", str(tmp_path / "env"))
    assert done.returncode == 2
    assert "'big' is not a MIG profile: expected one such as 1g.10gb" in done.stderr
    assert not (tmp_path / "env").exists()
