"""Trainer log lines, stamped with the seconds since the trainer started (or left standby).

The stamps make a resize pause readable in ``trainer.log``: import, restore, first step.
"""

from __future__ import annotations

import time

T0 = time.monotonic()  # reset by the trainer when it starts training this generation


def log(message: str) -> None:
    print(f"[elastic +{time.monotonic() - T0:.2f}s] {message}", flush=True)
