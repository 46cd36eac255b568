"""A shared scheduler on a mixed inventory described by --simulated-gpus: each GPU's kind and
MIG instances through the API and the CLI's table; a bad description, or any refused setting,
stops it with the reason before it serves."""

from __future__ import annotations

import subprocess
import sys

import pytest
from servers import DaemonProcess, call, free_port

from jupyter_elastic_gpu.status_table import format_status

pytestmark = pytest.mark.slow


def test_a_scheduler_on_a_mixed_inventory_shows_each_gpu_s_kind(tmp_path):
    layout = "2xA100-80GB,2xT4,H100-80GB[3g.40gb,2x2g.20gb]"
    daemon = DaemonProcess(tmp_path, free_port(), extra=["--simulated-gpus", layout])
    token = daemon.add_user("ann")
    daemon.start()
    try:
        code, gpus = call("GET", daemon.api_url + "gpus", token)
        assert code == 200
        assert [(g["id"], g["kind"]) for g in gpus["gpus"]] == [
            ("0", "A100-80GB"),
            ("1", "A100-80GB"),
            ("2", "T4"),
            ("3", "T4"),
            ("4", "H100-80GB"),
        ]
        assert gpus["gpus"][0]["memory_total_mb"] == 80 * 1024
        assert [g["mig"] for g in gpus["gpus"][:4]] == [None] * 4
        assert [s["profile"] for s in gpus["gpus"][4]["mig"]] == ["3g.40gb", "2g.20gb", "2g.20gb"]
        code, status = call("GET", daemon.api_url + "status", token)
        assert code == 200
        table = format_status(status).splitlines()
        assert table[0].split() == ["GPU", "KIND", "HOLDER"]
        assert table[1].split()[:2] == ["0", "A100-80GB"] and table[4].split()[:2] == ["3", "T4"]
    finally:
        daemon.stop()


def test_a_scheduler_refuses_a_bad_description_in_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "scheduler", "--port",
         str(free_port()), "--state-dir", str(tmp_path / "state"),
         "--simulated-gpus", "2xA100{3g.40gb}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode != 0
    assert "cannot start: ValueError: simulated_gpus: expected a count (4) or counts" in out.stderr
    assert "'2xA100{3g.40gb}' is not one" in out.stderr


def test_a_refused_setting_stops_the_shared_scheduler_instead_of_running_on_defaults(tmp_path):
    """Jupyter's extension loader logs a setting it refuses and goes on with the defaults:
    another state folder and database than asked. The shared scheduler stops instead."""
    state = tmp_path / "state"
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "scheduler", "--port",
         str(free_port()), "--state-dir", str(state),
         "--ElasticGPUApp.cluster_backend=nonsense"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.strip().endswith(
        "jupyter-elastic-gpu scheduler: error: TraitError: The 'cluster_backend' trait of a "
        "SchedulerDaemonApp instance expected any of ['local', 'ray'], not the str 'nonsense'."
    )
    assert not state.exists() and list(tmp_path.iterdir()) == []  # nothing written anywhere
