"""What wakes the sidecar's loop before its next tick: a self-pipe that signal handlers (by
``signal.set_wakeup_fd``) and the heartbeat thread write to, and the cancel signals counted
on the way (a second one kills the trainer at once)."""

from __future__ import annotations

import contextlib
import os
import select
import signal

#: SIGUSR1: the grant file changed (the CLI's nudge); SIGCHLD: a trainer ended; the others
#: ask the job to stop.
WAKING = (signal.SIGUSR1, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CANCELLING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Wakeup:
    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        self._cancels = 0

    def install(self) -> None:
        """Handle ``WAKING`` here (from the main thread, as Python requires)."""
        for sig in WAKING:
            signal.signal(sig, self._on_signal)
        os.set_blocking(self._w, False)
        signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)

    def uninstall(self) -> None:
        with contextlib.suppress(ValueError):  # not the main thread
            signal.set_wakeup_fd(-1)

    def _on_signal(self, signum, frame) -> None:
        if signum in CANCELLING:
            self._cancels += 1

    def wake(self) -> None:
        """From any thread: the loop's current wait ends now."""
        with contextlib.suppress(OSError):
            os.write(self._w, b"\0")

    def wait(self, timeout: float) -> None:
        """Until woken, or ``timeout`` seconds."""
        r, _, _ = select.select([self._r], [], [], timeout)
        if r:
            with contextlib.suppress(OSError):
                os.read(self._r, 4096)

    def take_cancels(self) -> int:
        """The cancel signals received since the last call."""
        n, self._cancels = self._cancels, 0
        return n
