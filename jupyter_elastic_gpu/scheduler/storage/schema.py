"""The database's schema, as numbered migrations that only move forward.

The schema version is SQLite's ``user_version``; a database newer than ``MIGRATIONS`` is
refused (``Store.migrate``), never read by guesswork.
"""

from __future__ import annotations

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
    # 3: job rows that cannot be read are moved here whole, their columns untouched (no type:
    # any value is kept as it was), with when and why; never dropped.
    """
    CREATE TABLE quarantine (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        quarantined_at REAL NOT NULL,
        error TEXT NOT NULL,
        id, user, state, submitted_at, finished_at, data
    );
    """,
    # 4: a job's spec may name the notebook that submitted it (spec.notebook, in the JSON of
    # its row: no table changes). An older version would set every such row aside as
    # unreadable (quarantine); at this schema version it refuses the database instead, and
    # says to upgrade.
    """
    -- spec.notebook
    """,
    # 5: settings an admin changes while the scheduler runs (group weights, drained GPUs), as
    # JSON per key; and each user's GPU usage for fair share, decayed, as of ``at``.
    """
    CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at REAL NOT NULL,
        updated_by TEXT
    );
    CREATE TABLE usage (
        user TEXT PRIMARY KEY,
        gpu_s REAL NOT NULL,
        at REAL NOT NULL
    );
    """,
    # 6: jobs past the retention whose rows are gone and whose directories are still to be
    # removed by their owner's side (``retention.py``); a row leaves once its directory has.
    """
    CREATE TABLE expired (
        id TEXT PRIMARY KEY,
        user TEXT NOT NULL,
        job_dir TEXT NOT NULL,
        expired_at REAL NOT NULL
    );
    CREATE INDEX expired_user ON expired(user);
    """,
)


def migration_scripts(version: int) -> list[str]:
    """The scripts that bring a database at schema ``version`` to this version's, each a
    transaction of its own."""
    return [
        f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;"
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1)
    ]
