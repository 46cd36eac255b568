"""Recovering a damaged scheduler database: keep it, read what SQLite still can, start anew.

``salvage(path)`` copies the damaged file (and its WAL and SHM) aside, reads every table row
by row, skipping past pages SQLite cannot read, checks each row (a row read from a damaged
page may be garbage), writes what is sound into a new database at the schema version of the
damaged one, brings it up to this version's schema, quarantines job rows that do not parse,
and puts it in place of the damaged file. The report says what was recovered and what was
lost: jobs that other tables name but whose row is gone, events missing from the sequence,
rows that were unreadable. ``jupyter elastic-gpu doctor --repair`` calls it
(``jupyter_elastic_gpu/doctor.py``) with the database locked, so no scheduler runs meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import dbfile
from .quarantine import JOB_ROWS, QUARANTINE, QUARANTINED, quarantine_message, read_row
from .schema import MIGRATIONS, migration_scripts

#: The tables of the schema and the columns kept of each (rowid aside), in the oldest
#: schema that has them; ``quarantine`` exists from version 3.
TABLES: dict[str, tuple[str, ...]] = {
    "jobs": ("id", "user", "state", "submitted_at", "finished_at", "data"),
    "progress": ("job_id", "t", "record"),
    "events": ("seq", "job_id", "t", "kind", "message", "data"),
    "quarantine": (
        "seq",
        "quarantined_at",
        "error",
        "id",
        "user",
        "state",
        "submitted_at",
        "finished_at",
        "data",
    ),
}
#: How far past an unreadable page the reader probes for rows it can read again.
PROBES = 40
HEADER = b"SQLite format 3\x00"


@dataclass
class Salvage:
    kept: str  # where the damaged file (and its -wal, -shm) now lies
    recovered: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, int] = field(default_factory=dict)  # rows read but not sound
    damaged_tables: list[str] = field(default_factory=list)  # a scan of them hit the damage
    jobs_lost: list[str] = field(default_factory=list)  # named elsewhere, their row gone
    events_missing: int = 0
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    version: int | None = None  # the damaged file's schema version, from its header

    def lines(self) -> list[str]:
        out = [f"kept the damaged file as {self.kept} (with its -wal and -shm, if any)"]
        if not any(self.recovered.get(t) for t in TABLES) and self.damaged_tables:
            return [*out, "nothing could be read from it: the new database is empty"]
        for table in TABLES:
            n, bad = self.recovered.get(table, 0), self.unreadable.get(table, 0)
            extra = f", {bad} unsound rows left out" if bad else ""
            hit = " (the scan hit damaged pages)" if table in self.damaged_tables else ""
            out.append(f"{table}: {n} rows recovered{extra}{hit}")
        for job_id, error in self.quarantined:
            out.append(f"job {job_id} did not parse ({error}): quarantined")
        if self.jobs_lost:
            shown = ", ".join(self.jobs_lost[:10]) + (" ..." if len(self.jobs_lost) > 10 else "")
            out.append(
                f"lost: {len(self.jobs_lost)} jobs named by events or progress have no row "
                f"left ({shown})"
            )
        if self.events_missing:
            out.append(f"lost: about {self.events_missing} events (sequence numbers missing)")
        if self.damaged_tables or self.unreadable:
            out.append(
                "lost too: whatever the damaged pages held that could not be read; the kept "
                "copy is there for a closer look"
            )
        return out


def header_version(path: str) -> int | None:
    """``PRAGMA user_version`` as the file's header has it (None: no SQLite header)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if len(head) < 64 or not head.startswith(HEADER):
        return None
    return int.from_bytes(head[60:64], "big", signed=True)


def keep_copy(path: str, stamp: str) -> str:
    kept = f"{path}.damaged-{stamp}"
    for suffix in ("", *dbfile.COMPANIONS):
        if os.path.exists(path + suffix):
            shutil.copy2(path + suffix, kept + suffix)
            os.chmod(kept + suffix, 0o600)
    return kept


def read_table(con: sqlite3.Connection, table: str) -> tuple[list[tuple], bool]:
    """Every row of ``table`` SQLite can still read, by rowid, and whether the scan hit
    damage (then it probes further rowids, up to ``PROBES`` times)."""
    columns = ", ".join(f"CAST({c} AS BLOB)" if c == "data" else c for c in TABLES[table])
    query = f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid"
    rows: list[tuple] = []
    after, damaged, probes = -(2**63), False, 0
    while probes <= PROBES:
        try:
            for row in con.execute(query, (after,)):
                rows.append(row)
                after = row[0]
            return rows, damaged
        except sqlite3.DatabaseError:
            damaged, probes = True, probes + 1
            # Past the damage, further each time; from rowid 0 when the very first page is
            # damaged (rowids start at 1: probing up from -2**63 would never reach them).
            after = max(after, 0) + 2**probes
    return rows, damaged


def _sound(table: str, row: tuple) -> bool:
    """Whether a row read back has the types its table's readers expect."""
    values = dict(zip(("rowid", *TABLES[table]), row))

    def text(name: str) -> bool:
        return isinstance(values[name], str)

    def number(name: str) -> bool:
        return isinstance(values[name], (int, float))

    def json_object(raw: Any, optional: bool = False) -> bool:
        if raw is None:
            return optional
        with contextlib.suppress(ValueError, TypeError, RecursionError):
            return isinstance(json.loads(raw), dict)
        return False

    if table == "progress":
        return text("job_id") and number("t") and json_object(values["record"])
    if table == "events":
        return (
            isinstance(values["seq"], int)
            and number("t")
            and text("kind")
            and text("message")
            and (values["job_id"] is None or text("job_id"))
            and json_object(values["data"], optional=True)
        )
    if table == "jobs":
        return text("id")  # the rest is judged by parsing it: quarantined if it does not
    return True  # quarantine rows are kept as they are


def salvage(path: str, parse: Callable[[dict], Any], stamp: str | None = None) -> Salvage:
    """Replace the damaged database at ``path`` by what can be read of it (see the module)."""
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    report = Salvage(kept=keep_copy(path, stamp), version=header_version(path))
    tables: dict[str, list[tuple]] = {}
    with _connect(report.kept) as old:
        for table in TABLES:
            try:
                rows, damaged = read_table(old, table)
            except sqlite3.Error:  # no such table (an old schema), or nothing readable
                rows, damaged = [], table != "quarantine"
            sound = [r for r in rows if _sound(table, r)]
            tables[table] = sound
            report.unreadable[table] = len(rows) - len(sound)
            if damaged:
                report.damaged_tables.append(table)
    fresh = f"{path}.recovering-{stamp}"
    _build(fresh, tables, report, parse)
    os.replace(fresh, path)
    for suffix in dbfile.COMPANIONS:  # they belonged to the damaged file (copies are kept)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + suffix)
    os.chmod(path, 0o600)
    return report


@contextlib.contextmanager
def _connect(path: str) -> Iterator[sqlite3.Connection]:
    con = sqlite3.connect(path, isolation_level=None)
    try:
        yield con
    finally:
        con.close()


def _build(
    fresh: str, tables: dict[str, list[tuple]], report: Salvage, parse: Callable[[dict], Any]
) -> None:
    known = report.version if report.version is not None else len(MIGRATIONS)
    version = min(max(known, 1), len(MIGRATIONS))  # rows go in at the schema they were in
    with _connect(fresh) as con:
        con.execute("PRAGMA journal_mode=WAL")
        for script in migration_scripts(0)[:version]:
            con.executescript(script)
        con.execute("BEGIN")
        for table, rows in tables.items():
            if table == "quarantine" and version < 3:
                continue
            names = TABLES[table]
            marks = ", ".join("?" * len(names))
            con.executemany(
                f"INSERT OR IGNORE INTO {table} ({', '.join(names)}) VALUES ({marks})",
                [_text(table, row[1:]) for row in rows],
            )
            report.recovered[table] = con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        con.execute("COMMIT")
        for script in migration_scripts(version):  # the newer schema (and its data changes)
            con.executescript(script)
        report.quarantined = quarantine_bad_rows(con, parse)
        report.recovered["jobs"] -= len(report.quarantined)
        report.recovered["quarantine"] = con.execute("SELECT COUNT(*) FROM quarantine").fetchone()[
            0
        ]
        named = {
            r[0]
            for t in ("progress", "events")
            for r in con.execute(f"SELECT DISTINCT job_id FROM {t} WHERE job_id IS NOT NULL")
        }
        have = {r[0] for r in con.execute("SELECT id FROM jobs UNION SELECT id FROM quarantine")}
        report.jobs_lost = sorted(named - have)
        top = con.execute("SELECT MAX(seq), COUNT(*) FROM events").fetchone()
        report.events_missing = (top[0] or 0) - top[1]


def _text(table: str, values: tuple) -> tuple:
    """A job's document back to text (it was read as bytes, to read broken text too)."""
    if table != "jobs":
        return values
    *head, data = values
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return (*head, data)


def quarantine_bad_rows(con: sqlite3.Connection, parse: Callable[[dict], Any]) -> list[tuple]:
    """Move every job row that does not parse to the quarantine table (one transaction);
    returns (job id, why) of each. The database must be at schema 3 or later."""
    bad = []
    for rowid, raw_id, raw_data in con.execute(JOB_ROWS).fetchall():
        job_id, job, problem = read_row(raw_id, raw_data, parse)
        if job is None:
            bad.append((rowid, job_id, problem))
    if not bad:
        return []
    now = time.time()
    con.execute("BEGIN IMMEDIATE")
    try:
        for rowid, job_id, problem in bad:
            con.execute(QUARANTINE[0], (now, problem, rowid))
            con.execute(QUARANTINE[1], (rowid,))
            con.execute(
                "INSERT INTO events (job_id, t, kind, message, data) VALUES (?, ?, ?, ?, NULL)",
                (job_id, now, QUARANTINED, quarantine_message(job_id, problem)),
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return [(job_id, problem) for _, job_id, problem in bad]
