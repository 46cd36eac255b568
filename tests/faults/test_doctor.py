"""`jupyter elastic-gpu doctor [--db PATH] [--repair]` on real database files: what it finds,
what it repairs, what it refuses, and its exit status (0 ok, 1 problems, 2 usage)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from jupyter_elastic_gpu.models import SubmitRequest
from jupyter_elastic_gpu.scheduler.jobs import JobRecord
from jupyter_elastic_gpu.scheduler.storage.dbfile import DatabaseLock
from jupyter_elastic_gpu.scheduler.storage.schema import MIGRATIONS
from jupyter_elastic_gpu.scheduler.storage.store import Store

SPEC = SubmitRequest(kind="synthetic", synthetic={"work": 10, "throughput": {"1": 1}})


def doctor(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jupyter_elastic_gpu.cli", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def make_database(path: Path, jobs: int = 40) -> list[str]:
    """A database the way the scheduler writes one: jobs, their events and progress."""

    async def write() -> list[str]:
        store = await Store.open(str(path))
        ids = []
        try:
            for i in range(jobs):
                job = JobRecord(id=f"j-{i:010d}", user="ann", name=f"n{i}", spec=SPEC, job_dir="/x")
                await store.save_job(job.to_dict())
                await store.add_event(job.id, "submitted", f"ann submitted n{i}")
                await store.add_progress(job.id, [{"t": float(t), "samples": t} for t in range(50)])
                ids.append(job.id)
        finally:
            await store.close()
        return ids

    return asyncio.run(write())


def test_exit_status_and_the_default_databases(tmp_path):
    env = {"JUPYTER_DATA_DIR": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "st")}
    done = doctor(env=env)
    assert done.returncode == 2 and "no scheduler database at" in done.stderr
    assert doctor("--db", str(tmp_path / "nothing.sqlite")).returncode == 2
    db = tmp_path / "data" / "elastic-gpu" / "scheduler.sqlite"
    make_database(db, jobs=3)
    done = doctor(env=env)  # found where the personal scheduler keeps it
    assert done.returncode == 0, done.stdout
    assert f"database {db}" in done.stdout and "3 jobs readable" in done.stdout
    with sqlite3.connect(db) as con:
        con.execute("UPDATE jobs SET data = '[1, 2]' WHERE id = 'j-0000000001'")
    done = doctor("--db", str(db))
    assert done.returncode == 1
    assert "problem: job j-0000000001 cannot be read" in done.stdout
    assert "--repair" in done.stdout.splitlines()[-1]


def test_repair_is_refused_while_a_scheduler_holds_the_database(tmp_path):
    db = tmp_path / "scheduler.sqlite"
    make_database(db, jobs=2)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE jobs SET data = '{' WHERE id = 'j-0000000000'")
    lock = DatabaseLock.acquire(str(db))  # as a running scheduler does
    try:
        done = doctor("--db", str(db), "--repair")
        assert done.returncode == 1, done.stdout
        assert f"not repaired: the scheduler database {db} is in use" in done.stdout
        assert f"pid {os.getpid()}" in done.stdout
        assert "note: in use by a scheduler" in done.stdout
    finally:
        lock.release()
    done = doctor("--db", str(db), "--repair")
    assert done.returncode == 0, done.stdout
    assert "job j-0000000000 quarantined" in done.stdout


def test_a_damaged_file_is_kept_and_what_can_be_read_is_recovered(tmp_path):
    db = tmp_path / "scheduler.sqlite"
    ids = make_database(db)
    size = os.path.getsize(db)
    with sqlite3.connect(db) as con:  # tables' and indexes' root pages (1-based) stay whole
        roots = {r[0] - 1 for r in con.execute("SELECT rootpage FROM sqlite_master") if r[0]}
    with open(db, "r+b") as f:  # one page in eight, past the schema, turned to noise
        for page in range(4, size // 4096, 8):
            if page not in roots:
                f.seek(page * 4096)
                f.write(os.urandom(4096))
    found = doctor("--db", str(db))
    assert found.returncode == 1 and "the file is damaged" in found.stdout
    fixed = doctor("--db", str(db), "--repair")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    out = fixed.stdout
    kept = next(
        Path(line.split(" as ")[1].split(" (")[0])
        for line in out.splitlines()
        if "kept the damaged file as" in line
    )
    assert kept.stat().st_size >= size  # the damaged file, whole
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        recovered = [r[0] for r in con.execute("SELECT id FROM jobs")]
        version = con.execute("PRAGMA user_version").fetchone()[0]
    assert 0 < len(recovered) < len(ids) and set(recovered) <= set(ids)
    assert version == len(MIGRATIONS)
    lost = len(ids) - len(recovered)
    assert any(line.strip().startswith("jobs:") for line in out.splitlines())
    assert "lost" in out, out  # what was lost is said
    # and the scheduler opens it
    asyncio.run(_opens(db, len(recovered), lost))


async def _opens(db: Path, jobs: int, lost: int) -> None:
    store = await Store.open(str(db))
    try:
        records = await store.load_records(JobRecord.from_dict, _NoLog())
        assert len(records) == jobs, (len(records), jobs, lost)
    finally:
        await store.close()


class _NoLog:
    def error(self, *args) -> None:
        raise AssertionError(args)
