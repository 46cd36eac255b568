"""Heartbeat to the scheduler: progress out, desired grant in (level-triggered).

Every ``interval`` seconds the sidecar POSTs its state to the scheduler URL with the job's
secret as a bearer token; the answer is the grant the scheduler wants. A lost answer changes
nothing and an unreachable scheduler means "keep running on the current grant": the next
heartbeat converges again. A refusal of credentials the scheduler had accepted is different:
the job's claim was voided (``EXIT_VOIDED``), and the sidecar is told (``on_voided``) once it
persists. Progress records are sent until a heartbeat carrying them is
acknowledged (2xx): the newest as ``progress``, those before it as ``backlog`` (at most
``MAX_PROGRESS_BACKLOG``), so what the trainer wrote while the scheduler was down or failing
reaches its database once it answers again. Standard library only.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from pathlib import Path

from .jobdir import ProgressTail
from .protocol import (
    ENV_SECRET,
    FINAL_HEARTBEAT_LINGER_S,
    MAX_HEARTBEAT_BYTES,
    MAX_PROGRESS_BACKLOG,
    VOIDED_AFTER_REFUSALS,
    Grant,
)


class HeartbeatClient:
    """The sidecar's side of the heartbeat route (docs/api.md)."""

    def __init__(
        self,
        url: str,
        job_id: str,
        secret: str,
        *,
        interval: float,
        snapshot: Callable[[], dict],
        on_grant: Callable[[Grant], None],
        log: Callable[[str], None],
        timeout: float = 5.0,
        progress: Path | None = None,
        on_voided: Callable[[int], None] | None = None,
    ):
        self.url = url
        self.job_id = job_id
        self._secret = secret
        self.interval = interval
        self.snapshot = snapshot
        self.on_grant = on_grant
        self.log = log
        self.timeout = timeout
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._problem: str | None = None  # the failure last logged, so each is logged once
        self.on_voided = on_voided
        self.sent = 0
        self._refused = 0  # refusals in a row since the last accepted beat
        self.voided = False
        self.settled = False  # the last beat got an answer that sending again cannot change
        # progress.jsonl from here on, and its records not acknowledged yet (the oldest are
        # dropped past the bound); used by the heartbeat thread only (the final beat comes
        # after it stopped)
        self._tail = ProgressTail(progress, from_end=True) if progress is not None else None
        self._pending: deque[dict] = deque(maxlen=MAX_PROGRESS_BACKLOG + 1)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout + 1)

    def _loop(self) -> None:
        # signals are for the main thread: CPython acts on them promptly only there
        signal.pthread_sigmask(
            signal.SIG_BLOCK,
            {signal.SIGUSR1, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP},
        )
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(self.interval)

    def final_beat(self, linger_s: float = FINAL_HEARTBEAT_LINGER_S) -> None:
        """The last heartbeat, once the sidecar has ended: sent again every ``interval`` for up
        to ``linger_s`` while the scheduler does not answer (a restart), so that the job's end
        and the progress written meanwhile reach it. An answer, even a refusal, ends it."""
        deadline = time.monotonic() + linger_s
        while True:
            self.beat()
            left = deadline - time.monotonic()
            if self.settled or left <= 0:
                return
            time.sleep(min(self.interval, left))

    def body(self) -> tuple[bytes, int]:
        """The heartbeat's body, and how many pending progress records it acknowledges once
        answered 2xx (older ones are left out to keep it under ``MAX_HEARTBEAT_BYTES``)."""
        if self._tail is not None:
            self._pending.extend(self._tail.read())
        body = dict(self.snapshot(), job_id=self.job_id, backlog=[])
        pending = list(self._pending)
        if pending:
            body["progress"], body["backlog"] = pending[-1], pending[:-1]
        data = json.dumps(body).encode()
        while len(data) > MAX_HEARTBEAT_BYTES and body["backlog"]:
            body["backlog"] = body["backlog"][len(body["backlog"]) // 2 + 1 :]
            data = json.dumps(body).encode()
        return data, len(pending)

    def beat(self) -> Grant | None:
        """Send one heartbeat; apply and return the grant from the answer, if any."""
        data, carried = self.body()
        self.settled = False
        req = urllib.request.Request(
            self.url,
            data=data,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self._secret}",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as e:
            self.settled = e.code < 500  # a refusal stays one; a server error may pass
            if e.code in (401, 403) and self.sent:  # accepted before: revoked since
                self._refused += 1
                if self._refused >= VOIDED_AFTER_REFUSALS and not self.voided:
                    self.voided = True
                    if self.on_voided is not None:
                        self.on_voided(e.code)
            elif e.code in (401, 403):
                self._report(
                    f"http{e.code}",
                    f"scheduler rejected this job's credentials (HTTP {e.code}): check "
                    f"{ENV_SECRET} and --job-id; the job keeps running on its grant",
                )
            else:
                self._report(f"http{e.code}", f"scheduler answered HTTP {e.code}; retrying")
            return None
        except (OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            self._report(
                "down",
                f"scheduler unreachable at {self.url} ({reason}); keeping the current grant, "
                f"retrying every {self.interval:g} s",
            )
            return None
        self.sent += 1
        self._refused = 0
        self.settled = True
        for _ in range(carried):  # stored: not sent again
            self._pending.popleft()
        try:
            grant = Grant.from_json(json.loads(payload))
        except ValueError as e:
            self._report("bad", f"scheduler sent an invalid grant ({e}); ignoring it")
            return None
        if self._problem is not None:
            self.log("scheduler reachable again")
            self._problem = None
        self.on_grant(grant)
        return grant

    def _report(self, key: str, message: str) -> None:
        if self._problem != key:
            self.log(message)
            self._problem = key
