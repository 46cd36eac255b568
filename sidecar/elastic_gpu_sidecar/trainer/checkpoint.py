"""Atomic, verified checkpoints in ``<job>/checkpoints``.

Protocol: files are written into ``.tmp-<n>-<pid>/``, fsynced, their sizes and SHA-256 recorded
in ``meta.json`` (written last, fsynced), the directory is renamed to ``ckpt-<n>`` and only
then is the ``latest`` pointer replaced atomically. A reader validates sizes and hashes before
trusting a checkpoint and falls back to the previous good one, saying so in the log, so a
half-written or damaged checkpoint is never restored. The last two checkpoints are kept, plus
any that a newer one references (the final state of a completed ``fit`` call).

Standard library only: the synthetic workload uses it too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..jobdir import atomic_write_bytes, fsync_dir

META = "meta.json"
LATEST = "latest"
_NAME = re.compile(r"^ckpt-(\d{8})$")
FileWriter = Callable[[Path], None]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Checkpoint:
    name: str
    path: Path
    meta: dict

    def file(self, name: str) -> Path:
        return self.path / name


class CheckpointStore:
    def __init__(self, root: Path, log: Callable[[str], None] = print, keep: int = 2):
        self.root = Path(root)
        self.log = log
        self.keep = keep
        self.root.mkdir(parents=True, exist_ok=True)

    # -- writing ------------------------------------------------------------------------------
    def clean_partial(self) -> None:
        """Remove directories left by a writer that died mid-checkpoint (never restored)."""
        for p in self.root.glob(".tmp-*"):
            self.log(f"removing half-written checkpoint {p.name} (its writer died before commit)")
            shutil.rmtree(p, ignore_errors=True)

    def _next_seq(self) -> int:
        seqs = [int(m.group(1)) for p in self.root.iterdir() if (m := _NAME.match(p.name))]
        for p in self.root.glob(".tmp-*"):
            with contextlib.suppress(ValueError, IndexError):
                seqs.append(int(p.name.split("-")[2]))
        return max(seqs, default=0) + 1

    def write(self, files: dict[str, FileWriter | bytes], meta: dict) -> Checkpoint:
        """Write a checkpoint atomically and point ``latest`` at it."""
        seq = self._next_seq()
        name = f"ckpt-{seq:08d}"
        tmp = self.root / f".tmp-{seq}-{os.getpid()}"
        tmp.mkdir()
        try:
            manifest = {}
            for fname, content in files.items():
                fpath = tmp / fname
                if isinstance(content, bytes):
                    fpath.write_bytes(content)
                else:
                    content(fpath)
                _fsync_file(fpath)
                manifest[fname] = {"size": fpath.stat().st_size, "sha256": _sha256(fpath)}
            meta = dict(meta, files=manifest, name=name, written_at=time.time())
            mpath = tmp / META
            mpath.write_text(json.dumps(meta, indent=1))
            _fsync_file(mpath)
            fsync_dir(tmp)
            os.rename(tmp, self.root / name)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(self.root)
        atomic_write_bytes(self.root / LATEST, (name + "\n").encode())
        self._prune(meta)
        return Checkpoint(name, self.root / name, meta)

    def _prune(self, newest_meta: dict) -> None:
        names = sorted(p.name for p in self.root.iterdir() if _NAME.match(p.name))
        keep = set(names[-self.keep :])
        keep.update(str(r) for r in newest_meta.get("references", []))
        for n in names:
            if n not in keep:
                shutil.rmtree(self.root / n, ignore_errors=True)

    # -- reading ------------------------------------------------------------------------------
    def validate(self, name: str) -> tuple[dict | None, str | None]:
        """Return (meta, None) for a complete checkpoint, (None, reason) otherwise."""
        path = self.root / name
        try:
            meta = json.loads((path / META).read_text())
        except FileNotFoundError:
            return None, "meta.json is missing"
        except (OSError, ValueError) as e:
            return None, f"meta.json is unreadable ({e})"
        files = meta.get("files")
        if not isinstance(files, dict):
            return None, "meta.json has no file manifest"
        for fname, info in files.items():
            fpath = path / fname
            try:
                size = fpath.stat().st_size
            except OSError:
                return None, f"{fname} is missing"
            if size != info.get("size"):
                return None, f"{fname} is truncated ({size} of {info.get('size')} bytes)"
            if _sha256(fpath) != info.get("sha256"):
                return None, f"{fname} is corrupt (checksum mismatch)"
        return meta, None

    def get(self, name: str) -> Checkpoint | None:
        meta, reason = self.validate(name)
        if meta is None:
            self.log(f"checkpoint {name} is damaged: {reason}")
            return None
        return Checkpoint(name, self.root / name, meta)

    def latest(self) -> Checkpoint | None:
        """The newest valid checkpoint; damaged ones are skipped with a line in the log."""
        names = sorted((p.name for p in self.root.iterdir() if _NAME.match(p.name)), reverse=True)
        try:
            pointed = (self.root / LATEST).read_text().strip()
        except OSError:
            pointed = None
        if pointed in names:  # the pointer wins; newer uncommitted-pointer dirs come after it
            names.remove(pointed)
            names.insert(0, pointed)
        rejected = []
        for name in names:
            meta, reason = self.validate(name)
            if meta is None:
                self.log(f"checkpoint {name} is damaged ({reason}); not restoring it")
                rejected.append(name)
                continue
            if rejected:
                self.log(f"falling back to the previous good checkpoint {name}")
            return Checkpoint(name, self.root / name, meta)
        return None
