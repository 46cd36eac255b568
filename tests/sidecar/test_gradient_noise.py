"""The gradient noise scale, measured from outside the script (``--measure-noise``).

The meter is checked against the exact per-sample gradients of a real Keras model on one and
two replicas, and a real sidecar job reports it with its progress across a resize.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from elastic_gpu_sidecar import protocol as P
from sidecar_helpers import ENV, SCRIPTS, progress, run_resized

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("replicas", [1, 2])
def test_the_meter_reads_the_exact_noise_scale(replicas):
    out = subprocess.run(
        [sys.executable, str(SCRIPTS / "noise_check.py"), str(replicas)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["why"] is None
    read, exact = got["read"], got["exact"]
    # one pair of consecutive steps in every `every` measured once (the first pair needs a
    # kept gradient), not once per replica
    assert read["noise_steps"] == got["steps"] // got["every"] - 1
    for key in ("grad_sqr", "grad_var", "noise_scale"):
        assert read[key] == pytest.approx(exact[key], rel=0.25), key


def test_a_job_reports_its_noise_scale_across_a_resize(tmp_path):
    job = tmp_path / "job"
    code, err = run_resized(
        job,
        "func_numpy.py",
        [str(tmp_path / "events.txt")],
        plan=[("0,1", None), ("0", 40)],
        extra=("--measure-noise", "--epochs", "1"),
        hold_for_standby=True,
    )
    assert code == P.EXIT_DONE, err
    recs = progress(job)
    for generation in (1, 2):
        measured = [r for r in recs if r["generation"] == generation and "noise_scale" in r]
        assert measured, f"generation {generation} reported no noise scale"
        last = measured[-1]
        assert last["noise_scale"] is None or last["noise_scale"] > 0
        assert last["grad_var"] > 0 and last["noise_steps"] > 0
        # one trainer process's steps, measured from its first pair on
        steps = [r["noise_steps"] for r in measured]
        assert steps == sorted(steps)
    assert "measuring the gradient noise scale" in (job / "trainer.log").read_text()


def test_a_job_without_the_option_measures_nothing(tmp_path):
    job = tmp_path / "job"
    code, err = run_resized(
        job,
        "func_numpy.py",
        [str(tmp_path / "events.txt")],
        plan=[("0", None)],
        extra=("--epochs", "1"),
    )
    assert code == P.EXIT_DONE, err
    assert not any("noise_scale" in r for r in progress(job))
