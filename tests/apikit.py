"""Calling the extension's API from in-process server tests (pytest-jupyter's ``jp_fetch``),
and waiting for what it shows."""

from __future__ import annotations

import asyncio
import json
import time


async def api(jp_fetch, path: str, method: str = "GET", body=None, params=None):
    """The JSON answer of ``elastic-gpu/api/PATH``. The client waits longer than the server's
    own bound on a request that waits for the scheduler's start (60 s: a Ray cluster's
    connection can take most of it on a loaded machine), so that bound is what a test sees."""
    r = await jp_fetch(
        "elastic-gpu",
        "api",
        *path.split("/"),
        method=method,
        body=json.dumps(body) if body is not None else None,
        params=params,
        request_timeout=90,
    )
    return json.loads(r.body or b"{}")


async def until(check, timeout: float, what: str):
    """The first truthy answer of ``await check()``, asked again until ``timeout`` seconds
    have passed; the assertion names ``what`` and the last answer."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def synthetic_job(name: str, lo: int, hi: int, work: float = 1e9) -> dict:
    """A synthetic job's submit body: ``lo``..``hi`` GPUs, ``work`` samples at a sub-linear
    speed (long enough by default to run until the test cancels it)."""
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": lo,
        "max_gpus": hi,
        "synthetic": {
            "work": work,
            "throughput": {"1": 100, "2": 190, "3": 270, "4": 360},
            "batch": 10,
        },
    }
