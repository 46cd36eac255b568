"""The query strings of the routes that take a few numbers (``GET jobs/ID/logs``, ``GET
jobs/ID/progress``, ``GET updates``): their names, defaults and meaning, which the handlers
read and the API document shows. ``JobFilter`` (``requests.py``) is the query of ``GET jobs``
and ``GET status``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import Strict


class Query(Strict):
    @classmethod
    def default(cls, name: str) -> Any:
        """The value a request without ``name`` gets."""
        return cls.model_fields[name].default


class LogsQuery(Query):
    tail: float = Field(
        200,
        description="Lines to return from each log (at most the last 256 KiB); 0 or less "
        "returns all of that.",
    )


class ProgressQuery(Query):
    since: float | None = Field(
        None, description="Only records with `t` after this time (epoch seconds)."
    )


class UpdatesQuery(Query):
    since: float = Field(0, description="The last version the client has seen (0 answers at once).")
    timeout: float = Field(25.0, description="Seconds to wait at most, clamped to 0-60.")
