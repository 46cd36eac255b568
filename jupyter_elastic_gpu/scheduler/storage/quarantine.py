"""How a job row is read, and what becomes of one that cannot be: it is moved, untouched, to
the ``quarantine`` table with when and why, and an event says so; never dropped, never fatal.
``Store.load_records`` and ``repair`` both read rows this way."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Every job row, raw: a row whose text is not UTF-8 is read too (and quarantined).
JOB_ROWS = (
    "SELECT rowid, CAST(id AS BLOB) AS id, CAST(data AS BLOB) AS data FROM jobs "
    "ORDER BY submitted_at, id"
)
#: Move the job row ``rowid`` aside: (when, why, rowid), then (rowid,).
QUARANTINE = (
    "INSERT INTO quarantine (quarantined_at, error, id, user, state, submitted_at, finished_at, "
    "data) SELECT ?, ?, id, user, state, submitted_at, finished_at, data FROM jobs WHERE rowid = ?",
    "DELETE FROM jobs WHERE rowid = ?",
)
#: The event kind that says a job's row was quarantined (models.EventKind.QUARANTINED).
QUARANTINED = "quarantined"


def read_row(raw_id: Any, raw_data: Any, parse: Callable[[dict], T]) -> tuple[str, T | None, str]:
    """(job id as text, the parsed job or None, why it could not be read or "")."""
    job_id = bytes(raw_id or b"").decode("utf-8", "replace") if raw_id is not None else "?"
    try:
        doc = json.loads(bytes(raw_data)) if raw_data is not None else None
        if not isinstance(doc, dict):
            raise ValueError("its document is not a JSON object")
        if doc.get("id") != job_id:
            raise ValueError(f"its document names another job ({str(doc.get('id'))[:80]!r})")
        return job_id, parse(doc), ""
    except Exception as e:  # whatever does not parse is quarantined, never fatal
        return job_id, None, " ".join(f"{type(e).__name__}: {e}".split())[:1000]


def quarantine_message(job_id: str, error: str) -> str:
    return (
        f"job {job_id} could not be read from the database ({error}); its row was moved, as it "
        "was, to the quarantine table: `jupyter elastic-gpu doctor` lists it"
    )
