"""benchmarks/sweep.py as a user runs it: any choice of policies gets its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sweep.py"


def sweep(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--seeds", "1", "--kinds", "steady", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("policies", ["adaptive", "static"])
def test_one_policy_alone_gets_its_bounds_and_no_comparison(policies):
    out = sweep("--policies", policies)
    assert "makespan/LB median" in out
    if policies == "adaptive":
        assert "adaptive makespan: no other policy to compare with" in out
    assert "Traceback" not in out


def test_adaptive_against_another_says_where_it_is_behind():
    out = sweep("--policies", "adaptive,static")
    assert "adaptive makespan / best other policy: median" in out
    assert "adaptive mean JCT / best other policy: median" in out
