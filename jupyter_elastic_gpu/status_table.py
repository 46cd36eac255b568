"""The ``status`` document as the tables ``jupyter-elastic-gpu status`` prints: GPUs and their
holders, then the jobs. Made for people; ``status --json`` is the document itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .core.reason_text import gpu_range
from .notebook.text import epoch_text


def _cell(value: Any, width: int | None = None) -> str:
    text = "-" if value is None or value == "" or value == [] else str(value)
    text = " ".join(text.split())
    if width and len(text) > width:
        text = text[: width - 1] + "…"
    return text


def _holder(holder: Any) -> str:
    if holder is None or holder == "":
        return "free"
    if isinstance(holder, dict):
        who = holder.get("job") or holder.get("job_id") or holder.get("id")
        user = holder.get("user")
        return " ".join(x for x in (_cell(who), f"({user})" if user else "") if x)
    return _cell(holder)


def _range(lo: Any, hi: Any) -> str:
    return gpu_range(lo, hi) if isinstance(lo, int) and isinstance(hi, int) else "-"


def _epoch(progress: Any, state: Any) -> str:
    return (epoch_text(progress, state) if isinstance(progress, dict) else None) or "-"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; the last column runs free (it holds reasons)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = []
    for row in [list(headers), *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_status(doc: dict[str, Any]) -> str:
    """The ``status`` document as two tables: GPUs and their holders (and, under them, why
    GPUs stay idle when the scheduler says), then the jobs."""
    gpus = doc.get("gpus") or []
    jobs = doc.get("jobs") or []
    sliced = any(isinstance(g.get("mig"), list) for g in gpus)
    if sliced or len({g.get("kind") for g in gpus}) > 1:  # say which GPU is which
        rows = []
        for g in gpus:
            rows.append([_cell(g.get("id")), _cell(g.get("kind")), _holder(g.get("holder"))])
            slices = g.get("mig") if isinstance(g.get("mig"), list) else []
            for s in slices:
                if isinstance(s, dict):  # a MIG instance, under its GPU
                    rows.append(
                        [
                            f"  {_cell(s.get('uuid'))}",
                            _cell(s.get("profile")),
                            _holder(s.get("holder")),
                        ]
                    )
        head = table(["GPU", "KIND", "HOLDER"], rows)
    else:
        rows = [[_cell(g.get("id")), _holder(g.get("holder"))] for g in gpus]
        head = table(["GPU", "HOLDER"], rows) if gpus else "no GPUs"

    idle = doc.get("idle")
    parts = [f"{head}\n{_cell(idle)}" if gpus and idle else head]
    if not jobs:
        parts.append("no jobs")
    else:
        rows = [
            [
                _cell(j.get("id")),
                _cell(j.get("name"), 30),
                _cell(j.get("user")),
                _cell(j.get("state")),
                ",".join(map(str, j.get("gpus") or [])) or "-",
                _range(j.get("min_gpus"), j.get("max_gpus")),
                _epoch(j.get("progress"), j.get("state")),
                _cell(j.get("reason")),
            ]
            for j in jobs
        ]
        parts.append(
            table(["ID", "NAME", "USER", "STATE", "GPUS", "RANGE", "EPOCH", "REASON"], rows)
        )
    return "\n\n".join(parts)
