"""SQLite persistence through aiosqlite: jobs, bounded progress samples, an append-only event log.

One writer (the scheduler loop) in WAL mode, so readers never block it and a crash loses at
most the transaction in flight. The schema only moves forward through numbered migrations
(``PRAGMA user_version``); user data is never dropped and recreated.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from typing import Any

import aiosqlite
from elastic_gpu_sidecar.protocol import FINAL_JOB_STATES

#: Each entry upgrades the schema by one version. Append; never edit a shipped entry.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        state TEXT NOT NULL,
        submitted_at REAL NOT NULL,
        finished_at REAL,
        data TEXT NOT NULL
    );
    CREATE INDEX jobs_state ON jobs(state);
    CREATE INDEX jobs_user ON jobs(user);
    CREATE TABLE progress (
        job_id TEXT NOT NULL,
        t REAL NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX progress_job ON progress(job_id, t);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT,
        t REAL NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL,
        data TEXT
    );
    CREATE INDEX events_job ON events(job_id, seq);
    """,
    # 2: a job's requested count is spec.requested_gpus (it was spec.gpus, which means GPU ids
    # everywhere else).
    """
    UPDATE jobs SET data = json_set(
        json_remove(data, '$.spec.gpus'),
        '$.spec.requested_gpus',
        json_extract(data, '$.spec.gpus')
    ) WHERE json_type(data, '$.spec.gpus') IS NOT NULL;
    """,
)

FINAL_STATES = tuple(sorted(s.value for s in FINAL_JOB_STATES))


class Store:
    """The scheduler's database. ``await Store.open(path)``; ``await store.close()``."""

    def __init__(self, db: aiosqlite.Connection, path: str, progress_limit: int) -> None:
        self.db, self.path, self.progress_limit = db, path, progress_limit
        self._since_trim: dict[str, int] = {}

    @classmethod
    async def open(cls, path: str, progress_limit: int = 2000) -> Store:
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        db = await aiosqlite.connect(path)
        db.row_factory = aiosqlite.Row
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=5000"):
            async with db.execute(f"PRAGMA {pragma}"):
                pass
        store = cls(db, path, progress_limit)
        await store.migrate()
        return store

    async def close(self) -> None:
        await self.db.close()

    async def schema_version(self) -> int:
        async with self.db.execute("PRAGMA user_version") as cur:
            return (await cur.fetchone())[0]

    async def migrate(self) -> None:
        version = await self.schema_version()
        if version > len(MIGRATIONS):
            raise RuntimeError(
                f"{self.path} has schema version {version}, newer than this jupyter-elastic-gpu "
                f"understands ({len(MIGRATIONS)}): upgrade the package, or point db_path elsewhere"
            )
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            await self.db.executescript(
                f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;"
            )

    # -- jobs -------------------------------------------------------------------------------
    async def save_job(self, job: dict[str, Any]) -> None:
        """Insert or update one job (``job`` is its JSON document)."""
        # Every cursor is closed inside ``async with``: a cursor freed on the event loop while
        # aiosqlite's thread reuses its cached statement corrupts concurrent writes.
        async with self.db.execute(
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
        ):
            pass
        await self.db.commit()

    async def load_jobs(self, active_only: bool = False) -> list[dict[str, Any]]:
        query = "SELECT data FROM jobs"
        if active_only:
            query += f" WHERE state NOT IN ({','.join('?' * len(FINAL_STATES))})"
        query += " ORDER BY submitted_at, id"
        async with self.db.execute(query, FINAL_STATES if active_only else ()) as cur:
            return [json.loads(row["data"]) async for row in cur]

    # -- progress ---------------------------------------------------------------------------
    async def add_progress(self, job_id: str, records: Iterable[dict[str, Any]]) -> None:
        """Append progress records and keep only the newest ``progress_limit`` of the job."""
        rows = [(job_id, float(r.get("t", time.time())), json.dumps(r)) for r in records]
        if not rows:
            return
        async with self.db.executemany(
            "INSERT INTO progress (job_id, t, record) VALUES (?, ?, ?)", rows
        ):
            pass
        written = self._since_trim.get(job_id, 0) + len(rows)
        if written >= 100:  # trimming sorts the job's rows: do it now and then, not every time
            async with self.db.execute(
                "DELETE FROM progress WHERE job_id = ? AND rowid NOT IN (SELECT rowid FROM "
                "progress WHERE job_id = ? ORDER BY t DESC LIMIT ?)",
                (job_id, job_id, self.progress_limit),
            ):
                pass
            written = 0
        self._since_trim[job_id] = written
        await self.db.commit()

    async def progress(self, job_id: str, since: float | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT record FROM progress WHERE job_id = ?", [job_id]
        if since is not None:
            query += " AND t > ?"
            args.append(since)
        async with self.db.execute(query + " ORDER BY t", args) as cur:
            return [json.loads(row["record"]) async for row in cur]

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
        async with self.db.execute(
            "INSERT INTO events (job_id, t, kind, message, data) VALUES (?, ?, ?, ?, ?)",
            (job_id, t, kind, message, json.dumps(data) if data is not None else None),
        ) as cur:
            seq = cur.lastrowid
        await self.db.commit()
        return {
            "seq": seq,
            "job_id": job_id,
            "t": t,
            "kind": kind,
            "message": message,
            "data": data,
        }

    async def events(self, job_id: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM events", []
        if job_id is not None:
            query, args = query + " WHERE job_id = ?", [job_id]
        query += " ORDER BY seq DESC LIMIT ?"
        args.append(limit)
        async with self.db.execute(query, args) as cur:
            rows = [dict(row) async for row in cur]
        for row in rows:
            row["data"] = json.loads(row["data"]) if row["data"] else None
        return rows[::-1]
