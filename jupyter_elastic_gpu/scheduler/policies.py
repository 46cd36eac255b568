"""Which policies a scheduler can run: those of ``core``, and those installed packages add.

A package adds one through the ``jupyter_elastic_gpu.policies`` entry-point group
(``name = "module:Class"``, a class with ``name``, ``elastic``, ``preemptive`` and
``decide(snapshot, now)``); ``c.SchedulerService.policy = "name"`` then selects it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ..core.policies import POLICIES, Policy

ENTRY_POINTS = "jupyter_elastic_gpu.policies"


def available() -> dict[str, type | EntryPoint]:
    """Every policy by name (built-in ones win over a package's of the same name)."""
    found: dict[str, type | EntryPoint] = dict(POLICIES)
    for ep in entry_points(group=ENTRY_POINTS):
        found.setdefault(ep.name, ep)
    return found


def make(name: str, params: dict[str, Any]) -> Policy:
    """An instance of the policy called ``name`` (KeyError for an unknown one)."""
    found = available()[name]
    cls = found.load() if isinstance(found, EntryPoint) else found
    return cls(**params)
