"""MIG slices: a pool of their own, for the kernels and jobs that need a slice of a GPU.

A GPU in MIG mode is split into instances of fixed profiles (``1g.10gb``, ``3g.40gb``) that
CUDA sees as devices of their own, and never as the whole GPU: so the policy places no job on
such a GPU (``scheduler/snapshot.py``) and its instances are handed out here instead. Each
request names a profile and gets one instance of it, first asked first served; instances are
never joined for data parallelism (CUDA runs a process on one MIG instance at most). The
scheduler never changes a layout: it hands out the instances it finds, and a holder whose
instance left the layout (an admin re-partitioned the GPU) is told so (``gone``), to give it
back and ask again. A GPU an admin drained hands out none of its instances, and the holders
of its instances move off (``drained``), as jobs on a drained GPU do.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from .reason_kinds import ReasonKind
from .reasons import Told

#: A MIG profile's name, as NVML gives it: ``1g.10gb``, ``3g.40gb``, ``1g.10gb+me``, and
#: ``1c.3g.40gb`` (a compute instance of part of a GPU instance).
MIG_PROFILE = re.compile(r"(?:\d+c\.)?\d+g\.\d+gb(?:\+\w+)?", re.IGNORECASE)
#: The most characters a profile's name may have.
MAX_PROFILE_CHARS = 40


def check_profile(profile: str) -> str:
    """A MIG profile's name, lower-cased as NVML writes it; ValueError saying what one is."""
    text = profile.strip().lower()
    if len(text) > MAX_PROFILE_CHARS or not MIG_PROFILE.fullmatch(text):
        raise ValueError(
            f"{profile[:MAX_PROFILE_CHARS]!r} is not a MIG profile: expected one such as "
            "1g.10gb or 3g.40gb (nvidia-smi mig -lgip lists a GPU's profiles)"
        )
    return text


@dataclass(frozen=True)
class Slice:
    """One MIG instance: ``id`` names it in grants and to CUDA (``MIG-<uuid>``), ``gpu`` is
    the GPU it is part of."""

    id: str
    gpu: str
    profile: str


@dataclass(frozen=True)
class SliceAsk:
    """A lease or job that wants one instance of ``profile``; ``held``: the one it holds."""

    job_id: str
    profile: str
    held: str | None = None


@dataclass
class SliceDecision:
    #: job id -> the instance it holds from now on (kept, or handed out now)
    grants: dict[str, str] = field(default_factory=dict)
    #: job id -> the instance it held that is no longer in the layout
    gone: dict[str, str] = field(default_factory=dict)
    #: job id -> the instance it held, on a GPU drained since: it moves off
    drained: dict[str, str] = field(default_factory=dict)
    #: job id -> why it has no instance
    reasons: dict[str, Told] = field(default_factory=dict)


def assign(
    slices: Sequence[Slice], asks: Sequence[SliceAsk], drained: Collection[str] = ()
) -> SliceDecision:
    """Who holds which instance: every holder keeps its own while it is in the layout (the
    same id, of the same profile) and its GPU is not ``drained``, and
    each one waiting, in the order of ``asks`` (first asked first), gets a free instance of
    its profile, on the GPU with the fewest free ones (so that whole GPUs of free instances
    stay together for the next layout change); the rest say why they wait."""
    known = {s.id: s for s in slices}
    out = SliceDecision()
    taken: set[str] = set()
    for ask in asks:
        if ask.held is None:
            continue
        here = known.get(ask.held)
        if here is None or here.profile != ask.profile or ask.held in taken:
            out.gone[ask.job_id] = ask.held
        elif here.gpu in drained:
            out.drained[ask.job_id] = ask.held
        else:
            out.grants[ask.job_id] = ask.held
            taken.add(ask.held)
    out_of_service = Counter(s.profile for s in slices if s.gpu in drained)
    slices = [s for s in slices if s.gpu not in drained]
    total = Counter(s.profile for s in slices)
    waiting: Counter[str] = Counter()
    for ask in asks:
        if ask.held is not None:
            continue
        free = [s for s in slices if s.profile == ask.profile and s.id not in taken]
        if free:
            left = Counter(s.gpu for s in slices if s.id not in taken)
            best = min(free, key=lambda s: left[s.gpu])
            out.grants[ask.job_id] = best.id
            taken.add(best.id)
            continue
        figures: dict = {"profile": ask.profile, "slices": total[ask.profile]}
        if waiting[ask.profile]:
            figures["before"] = waiting[ask.profile]
        if out_of_service[ask.profile]:
            figures["drained"] = out_of_service[ask.profile]
        out.reasons[ask.job_id] = Told(ReasonKind.MIG_SLICE, figures)
        waiting[ask.profile] += 1
    return out


def profiles(slices: Sequence[Slice]) -> str:
    """The profiles there are, with their counts: ``1 3g.40gb, 2 1g.10gb``."""
    counts = Counter(s.profile for s in slices)
    return ", ".join(f"{n} {p}" for p, n in counts.items())
