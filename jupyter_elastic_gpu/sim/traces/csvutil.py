"""CSV reading for trace files, with every bad value reported by file, row and column.

Workload files come from spreadsheets, hand edits and other people's scripts. A reader that
fails with a bare ``ValueError`` deep inside a simulation costs a user an afternoon, so every
reader goes through these helpers and its errors all look alike::

    jobs.csv, row 12, column 'work': expected a number, got 'abc'

Row N is the N-th record after the header: line N+1 of a file without quoted line breaks
(blank lines are skipped but still counted, so the numbers keep matching the lines).
Cells are stripped of surrounding spaces; extra columns are allowed and ignored.

Any file may be gzip-compressed (``jobs.csv.gz``): it is recognised by its first bytes, not by
its name, and decompressed as it is read.
"""

from __future__ import annotations

import csv
import gc
import gzip
import math
import os
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO

from ..workload import TraceError

__all__ = [
    "CsvReader",
    "Row",
    "csv_stem",
    "open_csv",
    "open_text",
    "parse_float",
    "parse_int",
    "parse_nonnegative",
    "paused_gc",
    "read_rows",
]

PathLike = str | os.PathLike

_GZIP_MAGIC = b"\x1f\x8b"


def open_text(path: PathLike) -> IO[str]:
    """``path`` opened for reading as UTF-8 text for the csv module (a byte-order mark is
    dropped); a gzip file, whatever its name, is decompressed on the fly. Raises OSError."""
    with open(path, "rb") as f:
        compressed = f.read(2) == _GZIP_MAGIC
    if compressed:
        return gzip.open(path, "rt", newline="", encoding="utf-8-sig")
    return open(path, newline="", encoding="utf-8-sig")


def csv_stem(path: PathLike) -> str:
    """The file name without ``.csv`` / ``.csv.gz`` (``a/workload-6.csv.gz`` -> ``workload-6``)."""
    name = os.path.basename(os.fspath(path))
    if name.lower().endswith(".gz"):
        name = name[: -len(".gz")]
    return os.path.splitext(name)[0]


def parse_float(
    text: str,
    path: PathLike,
    row: int | None,
    column: str,
    *,
    minimum: float | None = None,
    positive: bool = False,
) -> float:
    """A finite float from ``text``; ``minimum``/``positive`` bound it (TraceError otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise TraceError(str(path), f"expected a number, got {text!r}", row, column) from None
    if not math.isfinite(value):
        raise TraceError(str(path), f"expected a finite number, got {text!r}", row, column)
    if positive and value <= 0:
        raise TraceError(str(path), f"must be positive, got {text}", row, column)
    if minimum is not None and value < minimum:
        what = "must not be negative" if minimum == 0 else f"must be at least {minimum:g}"
        raise TraceError(str(path), f"{what}, got {text}", row, column)
    return value


def parse_nonnegative(text: str, path: PathLike, row: int | None, column: str) -> float:
    """A finite float >= 0 (times, durations, work)."""
    return parse_float(text, path, row, column, minimum=0.0)


def parse_int(
    text: str, path: PathLike, row: int | None, column: str, *, minimum: int | None = None
) -> int:
    """An integer from ``text``; integral floats such as ``4.0`` (pandas exports) are accepted."""
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            as_float = math.nan
        if not (math.isfinite(as_float) and as_float.is_integer()):
            raise TraceError(
                str(path), f"expected a whole number, got {text!r}", row, column
            ) from None
        value = int(as_float)
    if minimum is not None and value < minimum:
        raise TraceError(str(path), f"must be at least {minimum}, got {text}", row, column)
    return value


class Row:
    """One data record, with typed accessors that raise TraceError naming file/row/column."""

    __slots__ = ("_index", "cells", "number", "path")

    def __init__(self, path: str, number: int, cells: list[str], index: dict[str, int]):
        self.path = path
        self.number = number
        #: Stripped cell texts, padded to the header's width (index them with CsvReader.index
        #: in hot loops; use the typed accessors for anything that can be wrong).
        self.cells = cells
        self._index = index

    def error(self, message: str, column: str | None = None) -> TraceError:
        """A TraceError at this row (raise it)."""
        return TraceError(self.path, message, self.number, column)

    def raw(self, column: str) -> str:
        """The stripped cell text ('' when the column is absent or the row is short)."""
        i = self._index.get(column)
        return "" if i is None else self.cells[i]

    def has(self, column: str) -> bool:
        """Whether the cell exists and is not empty."""
        return self.raw(column) != ""

    def get_str(self, column: str, default: str | None = None) -> str:
        """Cell text; an empty cell is an error unless ``default`` is given."""
        text = self.raw(column)
        if text:
            return text
        if default is not None:
            return default
        raise self.error("missing value", column)

    def get_float(
        self,
        column: str,
        *,
        minimum: float | None = None,
        positive: bool = False,
        default: float | None = None,
    ) -> float:
        """A finite float; an empty cell is an error unless ``default`` is given."""
        text = self.raw(column)
        if not text:
            if default is not None:
                return default
            raise self.error("missing value", column)
        return parse_float(text, self.path, self.number, column, minimum=minimum, positive=positive)

    def get_nonnegative(self, column: str, default: float | None = None) -> float:
        """A finite float >= 0."""
        return self.get_float(column, minimum=0.0, default=default)

    def get_int(
        self, column: str, *, minimum: int | None = None, default: int | None = None
    ) -> int:
        """A whole number; an empty cell is an error unless ``default`` is given."""
        text = self.raw(column)
        if not text:
            if default is not None:
                return default
            raise self.error("missing value", column)
        return parse_int(text, self.path, self.number, column, minimum=minimum)

    def as_dict(self) -> dict[str, str]:
        """All named cells (for messages and debugging)."""
        return {name: self.raw(name) for name in self._index if name}

    def __repr__(self) -> str:
        return f"Row({self.path!r}, {self.number}, {self.as_dict()!r})"


class CsvReader:
    """An open CSV file whose header has been checked; iterate it for :class:`Row` objects.

    Use through :func:`open_csv` (a context manager) or :func:`read_rows`.
    """

    def __init__(self, path: PathLike, required: Iterable[str] = ()):
        self.path = str(path)
        try:
            self._file: IO[str] = open_text(path)
        except OSError as e:
            raise TraceError(self.path, f"cannot read the file: {e.strerror or e}") from None
        try:
            self._reader = csv.reader(self._file)
            header = self._next_record(0)
            if header is None or not any(cell.strip() for cell in header):
                raise TraceError(self.path, "empty file (expected a header row)")
            self.columns: tuple[str, ...] = tuple(cell.strip() for cell in header)
            self.index: dict[str, int] = {}
            for i, name in enumerate(self.columns):
                if name in self.index and name:
                    raise TraceError(self.path, "appears twice in the header", column=name)
                self.index.setdefault(name, i)
            for name in required:
                if name not in self.index:
                    found = ", ".join(c for c in self.columns if c) or "none"
                    raise TraceError(
                        self.path,
                        f"missing column in the header (found: {found})",
                        column=name,
                    )
        except BaseException:
            self._file.close()
            raise
        self.rows_read = 0

    def _next_record(self, number: int) -> list[str] | None:
        try:
            return next(self._reader)
        except StopIteration:
            return None
        except UnicodeDecodeError as e:
            raise TraceError(self.path, f"not UTF-8 text ({e.reason})", number or None) from None
        except csv.Error as e:
            raise TraceError(self.path, f"malformed CSV ({e})", number or None) from None
        except (OSError, EOFError, zlib.error) as e:  # a damaged or truncated gzip file
            raise TraceError(self.path, f"cannot read the file: {e}", number or None) from None

    def __iter__(self) -> Iterator[Row]:
        width = len(self.columns)
        number = self.rows_read
        while True:
            number += 1
            cells = self._next_record(number)
            if cells is None:
                return
            self.rows_read = number
            cells = list(map(str.strip, cells))
            if not any(cells):
                continue  # blank line: skipped, but it keeps its number
            if len(cells) < width:
                cells.extend([""] * (width - len(cells)))
            elif len(cells) > width:
                if any(cells[width:]):
                    raise TraceError(
                        self.path,
                        f"{len(cells)} values but the header has {width} columns "
                        "(an unquoted comma?)",
                        number,
                    )
                del cells[width:]
            yield Row(self.path, number, cells, self.index)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> CsvReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_csv(path: PathLike, required: Iterable[str] = ()) -> CsvReader:
    """Open ``path`` and check that its header has every ``required`` column.

    Raises TraceError for an unreadable or empty file or a missing column. Use as
    ``with open_csv(p, ["a", "b"]) as reader: for row in reader: ...``.
    """
    return CsvReader(path, required)


def read_rows(path: PathLike, required: Iterable[str] = ()) -> list[Row]:
    """Every data row of ``path`` (the file is closed before returning)."""
    with open_csv(path, required) as reader:
        return list(reader)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects.

    Reading a large trace allocates hundreds of thousands of rows and job specs, none in a
    reference cycle; the collector's repeated full scans of them were a third of the time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
