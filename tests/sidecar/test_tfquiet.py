"""TensorFlow's start-up notices are dropped from descriptor 2 while it loads; errors and
anything else written there come out, in order, when it has loaded."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
from elastic_gpu_sidecar.trainer.keras.tfquiet import is_notice
from sidecar_helpers import ENV, SCRIPTS, finish, start

#: What TensorFlow 2.21 (and its CUDA build) print while loading, word for word.
NOTICES = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796137764.853016   16837 port.cc:153] oneDNN custom operations are on. You "
    "may see slightly different numerical results due to floating-point round-off errors.",
    "W0000 00:00:1758131045.228 3722035 computation_placer.cc:177] computation placer already "
    "registered.",
    "2025-09-17 14:44:05.157831: I external/local_xla/xla/tsl/cuda/cudart_stub.cc:32] Could "
    "not find cuda drivers on your machine, GPU will not be used.",
    "E0000 00:00:1758131045.203198 3722035 cuda_dnn.cc:8579] Unable to register cuDNN factory: "
    "Attempting to register factory for plugin cuDNN when one has already been registered",
]
ERRORS = [
    "E0000 00:00:1796137764.853016   16837 x.cc:1] could not open the device",
    "2025-09-17 14:44:05.157831: E tensorflow/core/x.cc:9] out of memory",
    "F0000 00:00:1796137764.853016   16837 x.cc:1] check failed",
    "Traceback (most recent call last):",
]

CHILD = """
import os, sys
from elastic_gpu_sidecar.trainer.keras.tfquiet import startup_notices_hidden
lines = sys.argv[1].split("|")
with startup_notices_hidden():
    for line in lines:
        os.write(2, (line + "\\n").encode())  # as C++ does: below sys.stderr
    print("python's own", file=sys.stderr)
print("after", file=sys.stderr)
"""


def _run(level: str | None) -> str:
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    lines = [x for pair in itertools.zip_longest(NOTICES, ERRORS) for x in pair if x]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "|".join(lines)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    return out.stderr


def test_notices_are_dropped_and_errors_kept_in_order():
    assert all(is_notice(n) for n in NOTICES) and not any(is_notice(e) for e in ERRORS)
    assert _run(None).splitlines() == [*ERRORS, "python's own", "after"]


def test_asking_for_tensorflow_s_notices_shows_them_all():
    assert _run("0").splitlines()[:2] == [NOTICES[0], ERRORS[0]]


@pytest.mark.slow
def test_a_job_s_log_starts_with_the_job_not_tensorflow_s_notices(tmp_path):
    """The trainer imports TensorFlow under the same filter: its log (what `logs` and
    job.logs() show) has the user's error and none of TensorFlow's start-up notices."""
    job = tmp_path / "job"
    env = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = start(job, "--gpus", "0", "--simulated", "--", str(SCRIPTS / "buggy.py"), env=env)
    code, _, err = finish(proc)
    assert code != 0, err
    log = (job / "trainer.log").read_text()
    assert "NameError: name 'x_train' is not defined" in log, log
    assert not any(is_notice(line) for line in log.splitlines()), log
    assert "oneDNN" not in log and "absl" not in log, log
