"""Where a command's results go: checked before the work, so that a mistyped folder costs no
long run that fails at its end, and written whole (the sidecar's ``atomic_write_bytes``: a new
file beside the old, renamed over it), so that a failed write (a full disk, an interrupt) never
leaves half a file where a good one was."""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Collection
from pathlib import Path

from elastic_gpu_sidecar.jobdir import atomic_write_bytes, atomic_write_json


def plot_formats() -> dict[str, str]:
    """The suffixes a figure can be written as (matplotlib's formats: png, svg, pdf ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return FigureCanvasBase.get_supported_filetypes()


def output_file(path: str, flag: str, formats: Collection[str] | None = None) -> Path:
    """``path`` checked as a file this user can write, named by the option ``flag`` in the
    error; ``formats``: the suffixes it may have, without the dot (None: any). Raises
    ValueError with what to do instead."""
    target = Path(path)  # (as given, no ~ expanded: the writer opens it as given)
    if formats is not None and target.suffix.lower().lstrip(".") not in formats:
        known = ", ".join(f".{s}" for s in sorted(formats))
        raise ValueError(f"{flag} {path}: its suffix says the format, one of {known}")
    if target.is_dir():
        raise ValueError(f"{flag} {path}: is a folder; name a file in it")
    folder = target.parent
    if not folder.is_dir():
        raise ValueError(f"{flag} {path}: there is no folder {folder}; create it first")
    _can_write_in(folder, path, flag)
    return target


def output_folder(path: str, flag: str) -> Path:
    """``path`` as a folder to write files into, made (with its parents) if missing."""
    target = Path(path)  # (as given, no ~ expanded: the writer opens it as given)
    if target.exists() and not target.is_dir():
        raise ValueError(f"{flag} {path}: is a file; name a folder")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{flag} {path}: cannot make the folder ({e.strerror})") from None
    _can_write_in(target, path, flag)
    return target


def _can_write_in(folder: Path, path: str, flag: str) -> None:
    """Make and remove a file in ``folder``, as writing a result whole will (permission bits
    alone do not say: a read-only mount, or a system folder to root)."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".", suffix=".part")
    except OSError as e:
        raise ValueError(
            f"{flag} {path}: cannot write in {folder} ({e.strerror}); name another place"
        ) from None
    os.close(fd)
    os.unlink(probe)


def write_json(path: str | Path, data: object) -> None:
    """``data`` as indented JSON at ``path``, written whole."""
    atomic_write_json(Path(path), data)


def save_figure(fig, path: str | Path, dpi: int) -> None:
    """A matplotlib figure at ``path``, in the format its suffix names, written whole."""
    suffix = Path(path).suffix.lstrip(".").lower() or None  # (None: matplotlib's default)
    image = io.BytesIO()
    fig.savefig(image, format=suffix, dpi=dpi)
    atomic_write_bytes(Path(path), image.getvalue())


__all__ = ["output_file", "output_folder", "plot_formats", "save_figure", "write_json"]
