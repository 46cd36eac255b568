"""What /proc says about real processes: their parents and states (defunct ones included)
and their environments, for the tests of what sidecars inherit and leave behind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    state: str  # "Z": defunct, ended but not waited for by its parent
    argv: tuple[str, ...]  # empty for a defunct process

    @property
    def defunct(self) -> bool:
        return self.state == "Z"


def processes() -> Iterator[Process]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # ended meanwhile
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]  # the name may hold spaces and ")"
        text = tuple(a.decode(errors="replace") for a in argv if a)
        yield Process(int(entry.name), int(ppid), state, text)


def children(parent: int) -> list[Process]:
    return [p for p in processes() if p.ppid == parent]


def environ(pid: int) -> dict[str, str]:
    """The environment ``pid`` was started with."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.decode(errors="replace").split("=", 1) for item in raw.split(b"\0") if item)
    return {pair[0]: pair[1] if len(pair) > 1 else "" for pair in pairs}
