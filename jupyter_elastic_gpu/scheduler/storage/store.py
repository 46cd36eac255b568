"""SQLite persistence through aiosqlite: jobs, bounded progress samples, an append-only event log.

One writer (the scheduler) in WAL mode, so readers never block it and a crash loses at most
the transaction in flight. The schema only moves forward through numbered migrations
(``schema.py``); user data is never dropped and recreated: a job row that cannot be read any
more is moved, untouched, to the ``quarantine`` table (``quarantine.py``, ``load_records``).

Every change is a transaction (``transaction``): writes of one request or one decision are
committed together or not at all, one transaction at a time. A database that cannot be
written (full, locked, read-only, failing, damaged) answers ``StorageUnavailable`` or
``StorageFull`` (``dbfile.storage_error``), and the next transaction tries again: the
scheduler recovers without a restart once the fault goes away. The database is held by one
scheduler at a time (``dbfile.DatabaseLock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import aiosqlite
from elastic_gpu_sidecar.protocol import FINAL_JOB_STATES

from ...errors import StorageUnavailable
from . import dbfile
from .quarantine import JOB_ROWS, QUARANTINE, QUARANTINED, quarantine_message, read_row
from .schema import MIGRATIONS, migration_scripts

T = TypeVar("T")


FINAL_STATES = tuple(sorted(s.value for s in FINAL_JOB_STATES))


def _reading(method: Callable[..., Any]) -> Callable[..., Any]:
    """A read that fails on the database answers what happened (not a bare sqlite3 error)."""

    @functools.wraps(method)
    async def read(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise self.error(e) from None

    return read


class Store:
    """The scheduler's database. ``await Store.open(path)``; ``await store.close()``."""

    def __init__(
        self,
        db: aiosqlite.Connection,
        path: str,
        progress_limit: int,
        lock: dbfile.DatabaseLock | None = None,
        busy_timeout: float = 5.0,
    ) -> None:
        self.db, self.path, self.progress_limit = db, path, progress_limit
        self.lock, self.busy_timeout = lock, busy_timeout
        self._since_trim: dict[str, int] = {}
        self._writing = asyncio.Lock()  # one transaction at a time
        self._begun = False  # the transaction under way has written
        self._failed: StorageUnavailable | None = None  # what the last transaction met
        self._in_transaction = contextvars.ContextVar(f"store-{id(self)}", default=False)

    @classmethod
    async def open(cls, path: str, progress_limit: int = 2000, busy_timeout: float = 5.0) -> Store:
        """Open (create, migrate) the database and hold it; StorageUnavailable when it cannot
        be: held by another scheduler, not writable, damaged, or newer than this version."""
        lock = None
        if path != ":memory:":
            dbfile.prepare(path)
            lock = dbfile.DatabaseLock.acquire(path)
        try:
            db = await aiosqlite.connect(path, isolation_level=None)  # transactions: ours
        except BaseException as e:
            if lock:
                lock.release()
            if isinstance(e, sqlite3.Error):
                raise dbfile.storage_error(e, path, busy_timeout) from None
            raise
        store = cls(db, path, progress_limit, lock, busy_timeout)
        try:
            db.row_factory = aiosqlite.Row
            for pragma in (
                f"busy_timeout={int(busy_timeout * 1000)}",
                "journal_mode=WAL",
                "synchronous=NORMAL",
            ):
                async with db.execute(f"PRAGMA {pragma}"):
                    pass
            async with db.execute("PRAGMA quick_check(1)") as cur:
                verdict = (await cur.fetchone())[0]
            if verdict != "ok":
                raise sqlite3.DatabaseError(f"database disk image is malformed: {verdict}")
            await store.migrate()
        except BaseException as e:
            await store.close()
            if isinstance(e, sqlite3.Error):
                raise store.error(e) from None
            raise
        return store

    async def close(self) -> None:
        try:
            await self.db.close()
        finally:
            if self.lock:
                self.lock.release()

    def error(self, e: sqlite3.Error) -> StorageUnavailable:
        return dbfile.storage_error(e, self.path, self.busy_timeout)

    @_reading
    async def schema_version(self) -> int:
        async with self.db.execute("PRAGMA user_version") as cur:
            return (await cur.fetchone())[0]

    async def migrate(self) -> None:
        version = await self.schema_version()
        if version > len(MIGRATIONS):
            raise StorageUnavailable(
                f"{self.path} has schema version {version}, newer than this jupyter-elastic-gpu "
                f"understands ({len(MIGRATIONS)}): upgrade the package, or point db_path elsewhere"
            )
        for script in migration_scripts(version):
            try:
                await self.db.executescript(script)
            except BaseException:
                await self._rollback()
                raise

    # -- transactions -----------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """Everything written inside is committed together, or nothing is (then the error
        says why: ``StorageUnavailable``, ``StorageFull``). Transactions run one at a time; a
        transaction inside another (in the same task) joins it. One that queued past the busy
        timeout behind a failing one fails at once with its error: a fault does not pile up
        requests that each wait the timeout in turn."""
        if self._in_transaction.get():
            yield
            return
        queued = time.monotonic()
        async with self._writing:
            failed = self._failed
            if failed is not None and time.monotonic() - queued > self.busy_timeout:
                raise type(failed)(failed.message)
            token = self._in_transaction.set(True)
            self._begun = False
            try:
                yield
                if self._begun:
                    await self.db.commit()
                self._failed = None
            except BaseException as e:
                await self._rollback()
                if isinstance(e, sqlite3.Error):
                    self._failed = self.error(e)
                    raise self._failed from None
                if isinstance(e, StorageUnavailable):
                    self._failed = e
                raise
            finally:
                self._begun = False
                self._in_transaction.reset(token)

    async def _write(self, sql: str, args: Any = (), many: bool = False) -> int | None:
        """One statement of the current transaction, which begins at its first write
        (IMMEDIATE: the write lock then, or the busy timeout, never half-way through)."""
        if not self._begun:
            async with self.db.execute("BEGIN IMMEDIATE"):
                pass
            self._begun = True
        # Every cursor is closed inside ``async with``: a cursor freed on the event loop while
        # aiosqlite's thread reuses its cached statement corrupts concurrent writes.
        async with (self.db.executemany if many else self.db.execute)(sql, args) as cur:
            return cur.lastrowid

    async def _rollback(self) -> None:
        with contextlib.suppress(Exception):  # SQLite may have rolled back already
            if self.db.in_transaction:
                await self.db.rollback()

    # -- jobs -------------------------------------------------------------------------------
    async def save_job(self, job: dict[str, Any]) -> None:
        """Insert or update one job (``job`` is its JSON document)."""
        async with self.transaction():
            await self._write(
                "INSERT INTO jobs (id, user, state, submitted_at, finished_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "state = excluded.state, finished_at = excluded.finished_at, data = excluded.data",
                (
                    job["id"],
                    job["user"],
                    job["state"],
                    job["submitted_at"],
                    job.get("finished_at"),
                    json.dumps(job),
                ),
            )

    @_reading
    async def load_jobs(self, active_only: bool = False) -> list[dict[str, Any]]:
        query = "SELECT data FROM jobs"
        if active_only:
            query += f" WHERE state NOT IN ({','.join('?' * len(FINAL_STATES))})"
        query += " ORDER BY submitted_at, id"
        async with self.db.execute(query, FINAL_STATES if active_only else ()) as cur:
            return [json.loads(row["data"]) async for row in cur]

    async def load_records(self, parse: Callable[[dict], T], log: Any) -> list[T]:
        """Every job, parsed with ``parse``. A row that does not parse is quarantined (moved
        whole to the ``quarantine`` table with the error; the log and the job's event log say
        so) and the others load: one bad row never stops the scheduler."""
        try:
            async with self.db.execute(JOB_ROWS) as cur:
                rows = [(r["rowid"], r["id"], r["data"]) async for r in cur]
        except sqlite3.Error as e:
            raise self.error(e) from None
        jobs = []
        for rowid, raw_id, raw_data in rows:
            job_id, job, problem = read_row(raw_id, raw_data, parse)
            if job is not None:
                jobs.append(job)
                continue
            await self.quarantine(rowid, job_id, problem)
            log.error("elastic-gpu: %s", quarantine_message(job_id, problem))
        return jobs

    async def quarantine(self, rowid: int, job_id: str, error: str) -> None:
        """Move the job row ``rowid`` to the quarantine table, and say so in its event log."""
        async with self.transaction():
            await self._write(QUARANTINE[0], (time.time(), error, rowid))
            await self._write(QUARANTINE[1], (rowid,))
            await self.add_event(job_id, QUARANTINED, quarantine_message(job_id, error))

    # -- retention --------------------------------------------------------------------------
    async def expire(self, jobs: Iterable[tuple[str, str, str]], at: float) -> None:
        """Forget the jobs ``(id, user, job_dir)``: their rows, progress and events go, and each
        job dir is listed in ``expired`` to be removed; all in one transaction (a crash leaves
        every job as it was, or gone with its dir listed)."""
        rows = [(job_id, user, job_dir, at) for job_id, user, job_dir in jobs]
        if not rows:
            return
        ids = [(row[0],) for row in rows]
        async with self.transaction():
            await self._write(
                "INSERT OR REPLACE INTO expired (id, user, job_dir, expired_at) "
                "VALUES (?, ?, ?, ?)",
                rows,
                many=True,
            )
            for table, column in (("jobs", "id"), ("progress", "job_id"), ("events", "job_id")):
                await self._write(f"DELETE FROM {table} WHERE {column} = ?", ids, many=True)
        for (job_id,) in ids:
            self._since_trim.pop(job_id, None)

    @_reading
    async def expired(self, user: str | None = None) -> list[dict[str, Any]]:
        """Expired jobs whose directories are still to be removed (``user``'s only, if given):
        ``{id, user, job_dir}``, oldest first."""
        query, args = "SELECT id, user, job_dir FROM expired", []
        if user is not None:
            query, args = query + " WHERE user = ?", [user]
        async with self.db.execute(query + " ORDER BY expired_at, id", args) as cur:
            return [dict(row) async for row in cur]

    async def forget_expired(self, ids: Iterable[str], user: str | None = None) -> None:
        """Drop the listed expired jobs (``user``'s only, if given): their dirs are gone."""
        args = [(job_id, user) for job_id in ids]
        if not args:
            return
        async with self.transaction():
            await self._write(
                "DELETE FROM expired WHERE id = ?1 AND (?2 IS NULL OR user = ?2)", args, many=True
            )

    # -- progress ---------------------------------------------------------------------------
    async def add_progress(self, job_id: str, records: Iterable[dict[str, Any]]) -> None:
        """Append the progress records the job does not have yet (a record is known by its
        time ``t``: a sidecar sends again what was not acknowledged) and keep only the newest
        ``progress_limit`` of the job."""
        rows = []
        for r in records:
            t = float(r.get("t", time.time()))
            rows.append((job_id, t, json.dumps(r), job_id, t))
        if not rows:
            return
        async with self.transaction():
            await self._write(
                "INSERT INTO progress (job_id, t, record) SELECT ?, ?, ? WHERE NOT EXISTS "
                "(SELECT 1 FROM progress WHERE job_id = ? AND t = ?)",
                rows,
                many=True,
            )
            written = self._since_trim.get(job_id, 0) + len(rows)
            if written >= 100:  # trimming sorts the job's rows: now and then, not every time
                await self._write(
                    "DELETE FROM progress WHERE job_id = ? AND rowid NOT IN (SELECT rowid FROM "
                    "progress WHERE job_id = ? ORDER BY t DESC LIMIT ?)",
                    (job_id, job_id, self.progress_limit),
                )
                written = 0
            self._since_trim[job_id] = written

    @_reading
    async def progress(self, job_id: str, since: float | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT record FROM progress WHERE job_id = ?", [job_id]
        if since is not None:
            query += " AND t > ?"
            args.append(since)
        async with self.db.execute(query + " ORDER BY t", args) as cur:
            rows = [row["record"] async for row in cur]
        return [r for r in map(_json_or_none, rows) if isinstance(r, dict)]  # damaged: skipped

    # -- events -----------------------------------------------------------------------------
    async def add_event(
        self,
        job_id: str | None,
        kind: str,
        message: str,
        data: dict | None = None,
        t: float | None = None,
    ) -> dict[str, Any]:
        t = time.time() if t is None else t
        async with self.transaction():
            seq = await self._write(
                "INSERT INTO events (job_id, t, kind, message, data) VALUES (?, ?, ?, ?, ?)",
                (job_id, t, kind, message, json.dumps(data) if data is not None else None),
            )
        return {
            "seq": seq,
            "job_id": job_id,
            "t": t,
            "kind": kind,
            "message": message,
            "data": data,
        }

    # -- settings and usage -----------------------------------------------------------------
    @_reading
    async def settings(self) -> dict[str, Any]:
        """{key: value} of every setting an admin changed (values are JSON documents)."""
        async with self.db.execute("SELECT key, value FROM settings") as cur:
            rows = [(row["key"], _json_or_none(row["value"])) async for row in cur]
        return {key: value for key, value in rows if value is not None}

    async def set_setting(self, key: str, value: Any, by: str | None = None) -> None:
        async with self.transaction():
            await self._write(
                "INSERT INTO settings (key, value, updated_at, updated_by) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at, updated_by = excluded.updated_by",
                (key, json.dumps(value, allow_nan=False), time.time(), by),
            )

    @_reading
    async def usage(self) -> dict[str, tuple[float, float]]:
        """{user: (decayed GPU-seconds, as of when)}."""
        async with self.db.execute("SELECT user, gpu_s, at FROM usage") as cur:
            return {row["user"]: (row["gpu_s"], row["at"]) async for row in cur}

    async def save_usage(self, usage: dict[str, float], at: float) -> None:
        """Replace each listed user's decayed usage, as of ``at``."""
        async with self.transaction():
            await self._write(
                "INSERT INTO usage (user, gpu_s, at) VALUES (?, ?, ?) ON CONFLICT(user) DO "
                "UPDATE SET gpu_s = excluded.gpu_s, at = excluded.at",
                [(user, float(gpu_s), at) for user, gpu_s in usage.items()],
                many=True,
            )

    @_reading
    async def events(self, job_id: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM events", []
        if job_id is not None:
            query, args = query + " WHERE job_id = ?", [job_id]
        query += " ORDER BY seq DESC LIMIT ?"
        args.append(limit)
        async with self.db.execute(query, args) as cur:
            rows = [dict(row) async for row in cur]
        for row in rows:
            data = _json_or_none(row["data"]) if row["data"] else None
            row["data"] = data if isinstance(data, dict) else None
        return rows[::-1]


def _json_or_none(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
