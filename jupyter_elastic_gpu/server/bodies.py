"""Each route's body limit, decided before the body arrives, and the refusal of a body over it.

The handlers stream their bodies (``stream_request_body``), so a Content-Length over the limit
is refused from the headers, and a chunked body is cut off where it passes the limit. A refused
body that is small enough is read to its end and dropped first, so that the client sees the
answer rather than a reset connection.
"""

from __future__ import annotations

from tornado import web

from ..errors import ElasticGPUError, TooLarge

#: Largest body of a submission to a user's own server (personal mode, or the server that
#: forwards to a shared scheduler): the variables passed with a job travel in it.
MAX_BODY_BYTES = 256 * 1024 * 1024
#: Largest body of a submission to the shared scheduler or the Hub service, which takes no
#: passed variables: a 1 MB script even at its most escaped, with its args, name and paths.
MAX_SUBMIT_BYTES = 8 * 1024 * 1024
#: Largest body of a heartbeat (a backlog of progress records) or of a list of removed jobs.
MAX_SMALL_BODY_BYTES = 1024 * 1024
#: Largest body of a route that takes a few fields (priority, drain, keep, weight, a lease).
MAX_FIELDS_BODY_BYTES = 64 * 1024
#: Largest body of a route that reads none (every GET; cancel, suspend, resume).
MAX_EMPTY_BODY_BYTES = 4 * 1024
#: A refused body up to this size is read to its end and dropped before the 413 goes out: a
#: client that reads its answer only once it has sent everything (urllib, requests) would
#: otherwise see the connection reset instead. A larger one is answered at once, as is one
#: whose client waits for ``100-continue``.
DRAIN_BYTES = 512 * 1024 * 1024


def _size(n: int) -> str:
    return f"{n / 2**20:.3g} MB" if n >= 2**20 else f"{n / 2**10:.3g} kB"


class StreamedBody:
    """The body half of ``ElasticAPIHandler``: its limit, its chunks, its refusals. The handler
    calls ``_start_body`` first in ``prepare`` and ``_check_declared`` once it knows the caller."""

    #: The largest body this route's POST or PUT reads; a larger one is refused unread.
    body_limit = MAX_EMPTY_BODY_BYTES

    def max_body_bytes(self) -> int:
        if self.request.method in ("GET", "HEAD"):
            return MAX_EMPTY_BODY_BYTES
        return self.body_limit

    def too_large(self, size: int | None) -> TooLarge:
        """The refusal of a body of ``size`` bytes (None: a chunked one, cut off) over this
        route's limit."""
        limit = _size(self._limit)
        if size is None:
            return TooLarge(f"the body is larger than {limit}, the most this route takes")
        return TooLarge(f"the body is {_size(size)}, more than the {limit} this route takes")

    def _start_body(self) -> None:
        # The body arrives after this, chunk by chunk (``data_received``), into request.body.
        self._body = bytearray()
        self.request.body = self._body  # type: ignore[assignment]
        self._refused: ElasticGPUError | web.HTTPError | None = None
        self._unread = 0

    def _check_declared(self) -> None:
        """Refuse a body whose Content-Length is over this route's limit, before it arrives."""
        self._limit = self.max_body_bytes()
        declared = self._declared()
        if declared is None or declared <= self._limit:
            return
        refused = self.too_large(declared)
        if not self.refuse(refused):
            self.fail(refused)

    def _declared(self) -> int | None:
        """The body's Content-Length; None when there is none (chunked, or no body) or it is
        malformed (tornado answers that)."""
        try:
            return int(self.request.headers.get("Content-Length", ""))
        except ValueError:
            return None

    def refuse(self, error: ElasticGPUError | web.HTTPError) -> bool:
        """Answer ``error`` once the body sent with the request has been read and dropped;
        False when it should be answered at once (no body, a chunked one, one too large to
        read, or a client waiting for ``100-continue``). Answered while the client still
        sends, the connection is closed with the body unread, and the client sees a reset or
        a broken pipe instead of the answer."""
        declared = self._declared()
        waits = self.request.headers.get("Expect", "").lower() == "100-continue"
        if not declared or declared > DRAIN_BYTES or waits:
            return False
        self.request.connection.set_max_body_size(declared)  # read to its end, then answer
        self._refused, self._unread = error, declared
        return True

    def data_received(self, chunk: bytes) -> None:
        if self._finished:
            return
        if self._refused is not None:  # a refused request's body, read and dropped
            self._unread -= len(chunk)
            if self._unread <= 0:
                self.fail(self._refused)
            return
        if len(self._body) + len(chunk) > self._limit:  # chunked, past the limit: cut off
            self.fail(self.too_large(None))
            return
        self._body += chunk
