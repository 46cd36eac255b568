"""`jupyter-elastic-gpu doctor [--db PATH] [--repair]`: check a scheduler database, and repair it.

The checks read only (the database may be in use): SQLite's ``integrity_check``, the schema
version against this version's, every job row parsed as the scheduler parses it, and the rows
quarantined so far (kept aside, listed). ``--repair`` changes the database, so it refuses
while a scheduler holds it (``scheduler/storage/dbfile.py``) and holds it itself meanwhile: job rows
that do not parse are quarantined, and a damaged file is kept aside while what SQLite can
still read goes into a new one (``scheduler/storage/repair.py``), with what was lost said.

Without ``--db`` it checks the databases of the schedulers of this account that exist: the
personal one (the Jupyter data dir) and the shared one (the state dir). Output goes to stdout,
one finding a line. Exit status, as the other commands: 0 nothing wrong (or all repaired), 1
problems found (or left), 2 bad usage (no such database).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .scheduler.jobs import JobRecord
from .scheduler.storage import dbfile, repair
from .scheduler.storage.quarantine import JOB_ROWS, read_row
from .scheduler.storage.schema import MIGRATIONS, migration_scripts

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check a scheduler database (and repair it with --repair)",
        description="Check a scheduler database: SQLite's integrity check, the schema version, "
        "every job row, the rows quarantined so far. --repair (with the scheduler stopped) "
        "quarantines job rows that do not parse and, for a damaged file, keeps it aside and "
        "recovers what SQLite can still read into a new one. Exit status: 0 nothing wrong, 1 "
        "problems found, 2 bad usage.",
    )
    p.add_argument("--db", metavar="PATH", help="the database (default: this account's)")
    p.add_argument("--repair", action="store_true", help="repair what can be repaired")
    p.set_defaults(func=run_doctor)


def default_databases() -> list[Path]:
    """The personal and the shared scheduler's default databases, for this account."""
    from jupyter_core.paths import jupyter_data_dir

    from .server.daemon import default_state_dir

    return [
        Path(jupyter_data_dir()) / "elastic-gpu" / "scheduler.sqlite",
        default_state_dir() / "scheduler.sqlite",
    ]


@dataclass
class Findings:
    ok: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    damaged: bool | None = False  # the file itself (not just some rows); None: unknown
    bad_rows: int = 0

    def lines(self) -> list[str]:
        return (
            [f"  ok: {t}" for t in self.ok]
            + [f"  note: {t}" for t in self.notes]
            + [f"  problem: {t}" for t in self.problems]
        )


def examine(path: str) -> Findings:
    """Every check, reading only."""
    found = Findings()
    pid = dbfile.holder(path)
    if pid is not None:
        who = f"pid {pid}" if pid else "a process"
        found.notes.append(f"in use by a scheduler ({who}): checked while it runs")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)  # opens on the first query
    try:
        _integrity(con, found)
        if found.damaged is False:
            _schema_and_rows(con, found)
    finally:
        con.close()
    return found


def _integrity(con: sqlite3.Connection, found: Findings) -> None:
    try:
        verdict = [r[0] for r in con.execute("PRAGMA integrity_check(20)")]
    except sqlite3.DatabaseError as e:
        verdict = [str(e)]
        if not ("malformed" in str(e) or "not a database" in str(e)):
            found.problems.append(f"cannot be read ({e}): is it readable by this account?")
            found.damaged = None  # neither sound nor known damaged: nothing to repair
            return
    if verdict == ["ok"]:
        found.ok.append("SQLite's integrity check")
        return
    found.damaged = True
    details = "; ".join(" ".join(v.split()) for v in verdict)[:600]
    found.problems.append(f"the file is damaged (SQLite: {details})")


def _schema_and_rows(con: sqlite3.Connection, found: Findings) -> None:
    version = con.execute("PRAGMA user_version").fetchone()[0]
    current = len(MIGRATIONS)
    if version > current:
        found.problems.append(
            f"schema version {version} is newer than this jupyter-elastic-gpu's ({current}): "
            "upgrade the package before using or repairing it"
        )
        return
    if version == 0:
        found.notes.append("an empty database (no scheduler has used it yet)")
        return
    older = f"; the next start migrates it to {current}" if version < current else ""
    found.ok.append(f"schema version {version}{older}")
    states: dict[str, int] = {}
    for _, raw_id, raw_data in con.execute(JOB_ROWS).fetchall():
        job_id, job, problem = read_row(raw_id, raw_data, JobRecord.from_dict)
        if job is None:
            found.bad_rows += 1
            found.problems.append(f"job {job_id} cannot be read: {problem[:300]}")
        else:
            states[job.state.value] = states.get(job.state.value, 0) + 1
    progress = con.execute("SELECT COUNT(*) FROM progress").fetchone()[0]
    events = con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    by_state = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
    found.ok.append(
        f"{sum(states.values())} jobs readable ({by_state}), {progress} progress records, "
        f"{events} events"
    )
    if version >= 3:
        rows = con.execute(
            "SELECT CAST(id AS BLOB), quarantined_at, error FROM quarantine ORDER BY seq"
        ).fetchall()
        for raw_id, at, error in rows:
            job_id = bytes(raw_id or b"?").decode("utf-8", "replace")
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
            found.notes.append(f"job {job_id} quarantined on {when}: {error[:300]}")


def repair_database(path: str, found: Findings) -> list[str]:
    """Repair what ``found`` says can be (the caller holds the database's lock)."""
    if found.damaged:
        return repair.salvage(path, JobRecord.from_dict).lines()
    if not found.bad_rows:
        return []
    con = sqlite3.connect(path, isolation_level=None)
    try:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        for script in migration_scripts(version):  # the quarantine table
            con.executescript(script)
        moved = repair.quarantine_bad_rows(con, JobRecord.from_dict)
    finally:
        con.close()
    return [f"job {job_id} quarantined: {error[:300]}" for job_id, error in moved]


def run_doctor(args: argparse.Namespace) -> int:
    if args.db:
        paths = [Path(args.db).expanduser()]
        if not paths[0].is_file():
            print(f"jupyter-elastic-gpu doctor: error: no database at {paths[0]}", file=sys.stderr)
            return EXIT_USAGE
    else:
        candidates = default_databases()
        paths = [p for p in candidates if p.is_file()]
        if not paths:
            where = " or ".join(str(p) for p in candidates)
            print(
                f"jupyter-elastic-gpu doctor: error: no scheduler database at {where}: give --db",
                file=sys.stderr,
            )
            return EXIT_USAGE
    worst = EXIT_OK
    for path in paths:
        worst = max(worst, _one(str(path), args.repair))
    return worst


def _one(path: str, fix: bool) -> int:
    print(f"database {path}")
    found = examine(path)
    print("\n".join(found.lines()))
    if not found.problems:
        return EXIT_OK
    if not fix:
        print(
            f"{len(found.problems)} problem(s): with the scheduler stopped, run `jupyter "
            f"elastic-gpu doctor --db {path} --repair`"
        )
        return EXIT_PROBLEMS
    if not (found.damaged or found.bad_rows):
        print("nothing --repair can do: see the problems above")
        return EXIT_PROBLEMS
    try:
        lock = dbfile.DatabaseLock.acquire(path)
    except Exception as e:  # held by a running scheduler
        print(f"not repaired: {getattr(e, 'message', e)}")
        return EXIT_PROBLEMS
    try:
        done = repair_database(path, found)
    finally:
        lock.release()
    print("repaired:\n" + "\n".join(f"  {line}" for line in done))
    after = examine(path)
    if after.problems:
        print("still wrong:\n" + "\n".join(after.lines()))
        return EXIT_PROBLEMS
    print(f"{path} is sound again")
    return EXIT_OK
