"""Test sessions running side by side on one machine (a test run while the full suite runs)
draw their servers' ports from slots of their own: the same ports walked by two sessions let
one's client reach the other's server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from servers import ENV_PORT_SLOT, PORT_BASE, PORT_BLOCK, PORT_BLOCKS

HERE = Path(__file__).resolve().parent
CLAIM = (
    "import sys; sys.path.insert(0, sys.argv[1]); import servers; "
    "print(servers.claim_port_slot(), servers.free_port(), flush=True); sys.stdin.read()"
)


def session(locks: Path) -> tuple[subprocess.Popen, int, int]:
    """A process that claims a slot as a test session does (its lock files in ``locks``), and
    holds it until its stdin closes; with the slot and the first port it drew."""
    env = {k: v for k, v in os.environ.items() if k != ENV_PORT_SLOT} | {"TMPDIR": str(locks)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLAIM, str(HERE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    slot, port = map(int, proc.stdout.readline().split())
    return proc, slot, port


def end(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


def test_sessions_side_by_side_get_slots_and_ports_of_their_own(tmp_path):
    assert os.environ[ENV_PORT_SLOT].isdigit()  # this session claimed one at its start
    first, a_slot, a_port = session(tmp_path)
    second, b_slot, b_port = session(tmp_path)
    try:
        assert (a_slot, b_slot) == (0, 1)
        span = PORT_BLOCKS * PORT_BLOCK  # a slot's ports: a block for each worker
        assert PORT_BASE <= a_port < PORT_BASE + span <= b_port < PORT_BASE + 2 * span
    finally:
        end(first)
    third, c_slot, _ = session(tmp_path)  # the slot of a session that ended is free again
    end(third)
    end(second)
    assert c_slot == 0
