"""The extension's log lines go through the Jupyter server's logger, with its prefix
("[W 2026-01-01 12:00:00.000 name] ..."): none is a bare line on stderr."""

from __future__ import annotations

import re

from servers import free_port

PREFIXED = re.compile(r"^\[[DIWEC] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [\w.]+\] ")


def test_every_line_of_the_extension_has_the_server_s_prefix(server_process):
    # simulated_gpus 0: the inventory looks for NVML and says what it found (a warning on a
    # machine without a driver), from a module without an app at hand
    server = server_process(port=free_port(), config={"simulated_gpus": 0})
    lines = server.log_path.read_text().splitlines()
    ours = [line for line in lines if "GPU inventory" in line or "elastic-gpu:" in line]
    assert any("GPU inventory: " in line for line in ours), lines
    assert any("elastic-gpu: embedded scheduler" in line for line in ours), lines
    bare = [line for line in ours if not PREFIXED.match(line)]
    assert not bare, bare
