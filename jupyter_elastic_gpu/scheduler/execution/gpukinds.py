"""What kind of GPU each one is: read from NVML's model name, or described for simulated GPUs.

A lab's GPUs are rarely all alike (servers bought years apart, a box with two kinds of card),
and a job's speed depends on the kind it runs on, so every GPU names its kind: the model
without the vendor's words (``NVIDIA A100-SXM4-80GB`` is ``A100-SXM4-80GB``, ``Tesla T4`` is
``T4``), or ``simulated`` for a simulated GPU described by a count alone.

Simulated GPUs are described as a count (``4``) or as counts of kinds (``2xA100-80GB,2xT4``:
two of each, in that order; ``A100-80GB`` alone is one), so that a laptop can try a mixed lab.
A kind ending in a size (``-80GB``) gives the simulated GPUs that much memory. A GPU in MIG
mode lists its instances' profiles in brackets: ``H100-80GB[3g.40gb,2x2g.20gb]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...core.slices import MIG_PROFILE

#: The kind of a simulated GPU described by a count alone.
SIMULATED = "simulated"
#: The most simulated GPUs one description may make.
MAX_SIMULATED = 1024
#: A kind's name: a letter or digit, then letters, digits, '.', '_' or '-' (40 at most).
KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
_ITEM = re.compile(r"(?:(\d+)\s*[xX*]\s*)?(.+)")
_MEMORY = re.compile(r"(?:^|[-_])(\d{1,4})GB$", re.IGNORECASE)
#: Words of a model name that say who made it, not what it is.
_VENDOR = ("NVIDIA ", "Tesla ", "Quadro ")
_GRAMMAR = (
    "expected a count (4) or counts of kinds, such as 2xA100-80GB,2xT4 (a kind: letters, "
    "digits, '.', '_' or '-'; a GPU in MIG mode lists its instances: H100-80GB[3g.40gb,2x2g.20gb])"
)
#: The most MIG instances one GPU has (A100, H100: 7).
MAX_MIG = 7


def kind_of(name: str) -> str:
    """The kind of a GPU from its model name (NVML's ``nvmlDeviceGetName``)."""
    text = " ".join(name.split())
    if not text or text.lower().startswith("simulated"):
        return SIMULATED
    changed = True
    while changed:
        changed = False
        for word in _VENDOR:
            if text.startswith(word) and len(text) > len(word):
                text, changed = text[len(word) :], True
    return text.replace(" ", "-")


def memory_mb(kind: str) -> float | None:
    """The memory a kind's name says (``A100-80GB``: 80 GiB in MiB), None if it says none."""
    m = _MEMORY.search(kind)
    return float(int(m.group(1)) * 1024) if m and int(m.group(1)) > 0 else None


@dataclass(frozen=True)
class SimulatedGpu:
    """One simulated GPU: its kind, and its MIG instances' profiles where it is in MIG mode
    (None: MIG off)."""

    kind: str
    mig: tuple[str, ...] | None = None


def parse_simulated(value: int | str) -> tuple[str, ...]:
    """The kind of each simulated GPU a description asks for, in order (``()`` for 0: none
    asked for); ValueError saying what is wrong and what is expected."""
    return tuple(g.kind for g in parse_layout(value))


def parse_layout(value: int | str) -> tuple[SimulatedGpu, ...]:
    """Each simulated GPU a description asks for, with its MIG layout: ``2xT4``, or
    ``H100-80GB[3g.40gb,2x2g.20gb]`` (one H100 in MIG mode with three instances; ``[]``: MIG
    mode with none)."""
    if isinstance(value, bool):
        raise ValueError(f"{_GRAMMAR}; got {value!r}")
    if isinstance(value, int):
        return tuple(SimulatedGpu(k) for k in _counted(value, SIMULATED, str(value)))
    text = str(value).strip()
    if re.fullmatch(r"\d+", text):
        return tuple(SimulatedGpu(k) for k in _counted(int(text), SIMULATED, text))
    if not text:
        raise ValueError(f"{_GRAMMAR}; got an empty description")
    gpus: list[SimulatedGpu] = []
    for item in _items(text):
        m = _ITEM.fullmatch(item)
        if not item or m is None:
            raise ValueError(f"{_GRAMMAR}; got an empty item in {text!r}")
        count, kind = m.group(1), m.group(2).strip()
        mig = None
        if kind.endswith("]") and "[" in kind:
            kind, _, inside = kind[:-1].partition("[")
            kind, mig = kind.strip(), _slices(inside, item)
        if not KIND.fullmatch(kind):
            raise ValueError(f"{_GRAMMAR}; {item!r} is not one")
        n = len(_counted(int(count) if count else 1, kind, item, allow_zero=False))
        gpus.extend([SimulatedGpu(kind, mig)] * n)
        if len(gpus) > MAX_SIMULATED:
            raise ValueError(f"at most {MAX_SIMULATED} simulated GPUs; {text!r} asks for more")
    return tuple(gpus)


def _items(text: str) -> list[str]:
    """The description's items: split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
        if depth < 0 or depth > 1:
            raise ValueError(f"{_GRAMMAR}; unbalanced brackets in {text!r}")
    if depth:
        raise ValueError(f"{_GRAMMAR}; unbalanced brackets in {text!r}")
    items.append(text[start:].strip())
    return items


def _slices(inside: str, item: str) -> tuple[str, ...]:
    """The MIG profiles in a GPU's brackets (``3g.40gb,2x2g.20gb``), at most ``MAX_MIG``."""
    profiles: list[str] = []
    for part in filter(None, (p.strip() for p in inside.split(","))):
        m = _ITEM.fullmatch(part)
        count, profile = (m.group(1), m.group(2).strip()) if m else (None, part)
        if not MIG_PROFILE.fullmatch(profile):
            raise ValueError(
                f"{_GRAMMAR}; {part!r} in {item!r} is not a MIG profile such as 1g.10gb"
            )
        profiles.extend([profile.lower()] * (int(count) if count else 1))
    if len(profiles) > MAX_MIG:
        raise ValueError(f"at most {MAX_MIG} MIG instances on a GPU; {item!r} asks for more")
    return tuple(profiles)


def mig_memory_mb(profile: str) -> float | None:
    """The memory a MIG profile's name says (``1g.10gb``: 10 GiB in MiB)."""
    m = re.search(r"(\d+)gb", profile, re.IGNORECASE)
    return float(int(m.group(1)) * 1024) if m else None


def _counted(n: int, kind: str, said: str, allow_zero: bool = True) -> tuple[str, ...]:
    if n < 0 or (n == 0 and not allow_zero):
        raise ValueError(f"{_GRAMMAR}; {said!r} asks for {n} GPUs")
    if n > MAX_SIMULATED:
        raise ValueError(f"at most {MAX_SIMULATED} simulated GPUs; {said!r} asks for {n}")
    return (kind,) * n
