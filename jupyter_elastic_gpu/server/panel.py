"""The JupyterLab panel's push channel (``ws?view=panel``): the GPUs, the queue and the
caller's jobs, sent whole once, then only what changed.

The three documents are those ``GET gpus``, ``GET queue`` and ``GET jobs`` answer, made by the
same backend calls and models, so the panel and the REST API never disagree. The first message
is ``{"type": "snapshot", "version", "gpus", "queue", "jobs"}``; after it, each change sends
``{"type": "delta", "version", ...}`` with only what changed: ``gpus`` (the whole document)
when it changed, and for ``queue`` and ``jobs`` a list delta by id, so that the update of one
job among 500 costs about one job's bytes. A list delta is ``{"changed": [entries], "removed":
[ids], "order": [ids]}``, each key only when it has something; a client applies it in that
order (docs/api.md, "The panel's websocket"):

1. drop the entries whose id is in ``removed``;
2. replace each entry of ``changed`` that it has (same id) where it stands, and append the
   others, in the order given;
3. when ``order`` is there, put the entries in that order (it lists every id).

``order`` is sent only when those two steps would not give the new order (a job moved in the
queue, not just a job added at its end).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from pydantic import BaseModel

from ..scheduler.port.backend import Backend
from ..scheduler.principal import Principal

Read = Callable[[Backend, Principal], Awaitable[BaseModel]]

#: The documents the panel follows: message key -> (the backend call that answers it, as its
#: REST route does; the list inside, or None for a document sent whole).
DOCUMENTS: dict[str, tuple[Read, str | None]] = {
    "gpus": (lambda backend, who: backend.gpus(who), None),
    "queue": (lambda backend, who: backend.queue(who), "queue"),
    "jobs": (lambda backend, who: backend.jobs(who), "jobs"),
}


async def documents(
    backend: Backend, who: Principal, keys: Iterable[str] = tuple(DOCUMENTS)
) -> dict[str, Any]:
    """The documents ``keys`` for ``who``, as the REST routes answer them (JSON values)."""
    out = {}
    for key in keys:
        read, _ = DOCUMENTS[key]
        out[key] = (await read(backend, who)).model_dump(mode="json")
    return out


def snapshot(version: int, docs: dict[str, Any]) -> dict[str, Any]:
    return {"type": "snapshot", "version": version, **docs}


def delta(version: int, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """The delta message from ``before`` to ``after``, or None when nothing changed."""
    message: dict[str, Any] = {}
    for key, (_, inner) in DOCUMENTS.items():
        if inner is None:
            if before[key] != after[key]:
                message[key] = after[key]
            continue
        change = list_delta(before[key][inner], after[key][inner])
        if change:
            message[key] = change
    return {"type": "delta", "version": version, **message} if message else None


def list_delta(before: list[dict], after: list[dict]) -> dict[str, list]:
    """What turns the list ``before`` into ``after`` (entries keyed by ``id``); {} if equal."""
    old = {entry["id"]: entry for entry in before}
    new_ids = [entry["id"] for entry in after]
    kept = set(new_ids)
    removed = [job_id for job_id in old if job_id not in kept]
    changed = [entry for entry in after if old.get(entry["id"]) != entry]
    gone = set(removed)
    expected = [job_id for job_id in old if job_id not in gone]
    expected += [entry["id"] for entry in changed if entry["id"] not in old]
    out: dict[str, list] = {}
    if changed:
        out["changed"] = changed
    if removed:
        out["removed"] = removed
    if expected != new_ids:
        out["order"] = new_ids
    return out


def apply(docs: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    """The documents after a delta message, by the client's rules above (what a client does;
    the tests check the rules with it)."""
    out = dict(docs)
    for key, (_, inner) in DOCUMENTS.items():
        if key not in message:
            continue
        if inner is None:
            out[key] = message[key]
            continue
        change = message[key]
        gone = set(change.get("removed", ()))
        entries = [e for e in docs[key][inner] if e["id"] not in gone]
        index = {e["id"]: i for i, e in enumerate(entries)}
        for entry in change.get("changed", ()):
            if entry["id"] in index:
                entries[index[entry["id"]]] = entry
            else:
                index[entry["id"]] = len(entries)
                entries.append(entry)
        if "order" in change:
            by_id = {e["id"]: e for e in entries}
            entries = [by_id[job_id] for job_id in change["order"]]
        out[key] = {**docs[key], inner: entries}
    return out
