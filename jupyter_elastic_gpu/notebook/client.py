"""The REST client every front end uses (CLI, the ``%%elastic_train`` magic, tests); how a
process finds its scheduler without being told is ``discovery.py``.

Synchronous, on the standard library's HTTP: it runs inside notebook kernels and short CLI
calls, where an event loop costs more than it gives. Each method calls one route of the route
table (``scheduler/port/routes.py``: its method and path) and returns the server's JSON
document as is.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..scheduler.port.routes import API_PREFIX, route

#: The API root under a server's base_url (``server/handlers.py`` serves it there).
API_SUFFIX = API_PREFIX + "/"
#: A scheduler to use: its Jupyter server's URL or its API root; the token to send.
ENV_URL = "ELASTIC_GPU_URL"
ENV_TOKEN = "ELASTIC_GPU_TOKEN"
#: Path segments of Jupyter's own pages: a URL copied from the browser ends in one of them.
_JUPYTER_PAGES = {"lab", "tree", "notebooks", "edit", "view", "doc", "terminals", "api", "hub"}
#: The reason a shared scheduler gives for not reading a job's logs itself (``errors.py``).
READ_BY_OWNER = "read-by-owner"
_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


class SchedulerError(Exception):
    """A request that did not succeed: ``status`` is the HTTP status, or None when the
    scheduler could not be found or reached; ``message`` is one sentence for the user."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason  # the server's "reason" field ("bad-request", ...), if any


@dataclass(frozen=True)
class Connection:
    """Where the scheduler's API root is, the token to send, and how that was found."""

    api_url: str
    token: str | None
    how: str  # "environment" | "jupyter-server" | "daemon"

    def client(self, timeout: float = 30) -> SchedulerClient:
        return SchedulerClient(self.api_url, self.token, timeout)


class SchedulerClient:
    """Synchronous client of the scheduler's REST API (docs/api.md).

    ``base_url`` is a Jupyter server's URL (``http://127.0.0.1:8888/``, with its base_url if
    any) or the API root under it (``http://127.0.0.1:8888/elastic-gpu/api/``); the shared
    scheduler is a Jupyter server too (``http://127.0.0.1:9111/``).
    """

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30) -> None:
        self.base_url = api_root(base_url)
        self.token = token or None
        self.timeout = timeout
        host = urllib.parse.urlsplit(self.base_url).hostname or ""
        # A proxy from http_proxy would swallow requests to this box (and see the token).
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK_HOSTS else []
        self._opener = urllib.request.build_opener(*handlers)

    # -- routes -------------------------------------------------------------------------------

    def whoami(self) -> dict:
        return self._call("whoami")

    def gpus(self) -> dict:
        return self._call("gpus")

    def jobs(self, query: Mapping[str, str] | None = None) -> dict:
        """The jobs ``query`` selects (``models.JobFilter.as_query``; none: the open jobs and
        the most recent finished ones)."""
        return self._call("jobs", query=query)

    def submit(self, body: dict) -> dict:
        return self._call("submit", body)

    def job(self, job_id: str) -> dict:
        return self._call("job", job_id=job_id)

    def cancel(self, job_id: str, force: bool = False) -> dict:
        """Checkpoint, then stop; ``force``: end its processes at once."""
        body = {"force": True} if force else {}
        return self._call("cancel", body, job_id=job_id)

    def suspend(self, job_id: str) -> dict:
        return self._call("suspend", job_id=job_id)

    def resume(self, job_id: str) -> dict:
        return self._call("resume", job_id=job_id)

    def keep(self, job_id: str, kept: bool = True) -> dict:
        return self._call("keep", {"kept": kept}, job_id=job_id)

    def logs(self, job_id: str, tail: int = 200) -> dict:
        """The ends of the job's logs. A shared scheduler reads no job files (it answers
        ``read-by-owner``): then this process, which runs as the job's owner, reads them from
        the job dir the scheduler names, never through a link."""
        try:
            return self._call("logs", query={"tail": tail}, job_id=job_id)
        except SchedulerError as e:
            if e.reason != READ_BY_OWNER:
                raise
            refused = e
        job_dir = self.job(job_id).get("job_dir")
        if not isinstance(job_dir, str) or not job_dir.startswith("/"):
            raise refused
        from elastic_gpu_sidecar.protocol import LOGS

        from ..scheduler.storage.ownfiles import read_logs

        try:
            return read_logs(job_dir, tail, LOGS)
        except OSError as e:
            raise SchedulerError(
                f"cannot read the logs in {job_dir} ({e.strerror or e}): {refused.message}",
                refused.status,
                refused.reason,
            ) from None

    def events(self, job_id: str) -> dict:
        return self._call("events", job_id=job_id)

    def progress(self, job_id: str, since: float | None = None) -> dict:
        query = {} if since is None else {"since": since}
        return self._call("progress", query=query, job_id=job_id)

    def queue(self) -> dict:
        return self._call("queue")

    def status(self, query: Mapping[str, str] | None = None) -> dict:
        return self._call("status", query=query)

    def launches(self) -> dict:
        return self._call("launches")

    def wait_updates(self, since: int, timeout: float) -> int:
        """Long poll: the state version once it passes ``since`` (or when the server's wait of
        ``timeout`` seconds ends, the current one)."""
        query = {"since": since, "timeout": timeout}
        doc = self._call("wait_updates", query=query, timeout=timeout + self.timeout)
        try:
            return int(doc["version"])
        except (KeyError, TypeError, ValueError):
            raise SchedulerError(
                f"the scheduler at {self.base_url} answered the long poll without a version: "
                f"{_snippet(json.dumps(doc))}"
            ) from None

    def open_lease(self, body: dict) -> dict:
        """GPUs for a kernel (``models.LeaseRequest``): the lease and its heartbeat secret."""
        return self._call("open_lease", body)

    def lease_kernel(
        self, kernel_id: str, gpus: int, timeout: float, mig: str | None = None
    ) -> dict:
        """Restart this server's kernel ``kernel_id`` with a lease of ``gpus`` GPUs (or one
        MIG slice of profile ``mig``), once held (waiting up to ``timeout`` seconds for it)."""
        body: dict = {"gpus": gpus} | ({"mig": mig} if mig else {})
        return self._call("lease_kernel", body, timeout=timeout, kernel_id=kernel_id)

    def set_priority(self, job_id: str, priority: float) -> dict:
        return self._call("set_priority", {"priority": priority}, job_id=job_id)

    def drain(self, gpu_id: str, drained: bool = True, force: bool = False) -> dict:
        return self._call("drain", {"drained": drained, "force": force}, gpu_id=gpu_id)

    def shares(self) -> dict:
        return self._call("shares")

    def set_group_weight(self, group: str, weight: float) -> dict:
        return self._call("set_group_weight", {"weight": weight}, group=group)

    # -- HTTP ---------------------------------------------------------------------------------

    def _call(
        self,
        name: str,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        **params: str,
    ) -> Any:
        """Route ``name`` of the route table, with the path parameters ``params``."""
        spec = route(name)
        if body is None and spec.method != "GET":
            body = {}
        return self._request(spec.method, spec.url(**params), body, query, timeout)

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"token {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise SchedulerError(
                f"not a usable scheduler URL {self.base_url!r}: expected "
                "http(s)://HOST:PORT/.../ (the API root)"
            )
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=timeout or self.timeout) as response:
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as e:
            raise _http_error(e, shown(url)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            # refused, DNS, TLS, timeout, a connection dropped mid-answer
            why = getattr(e, "reason", None) or e
            raise SchedulerError(
                f"cannot reach the scheduler at {shown(self.base_url)}: {why}; is JupyterLab "
                "(or `jupyter elastic-gpu scheduler`) running?"
            ) from None
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise SchedulerError(
                f"the server at {shown(url)} did not answer JSON (HTTP {status}): "
                f"{_snippet(raw)}; is "
                "this the elastic-gpu API root?",
                status,
            ) from None


def shown(url: str) -> str:
    """A URL as an error may show it: without its query, fragment or user info (a query holds
    the request's internal parameters, and a pasted URL may carry a token)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _snippet(raw: bytes | str, limit: int = 200) -> str:
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _http_error(e: urllib.error.HTTPError, url: str) -> SchedulerError:
    """The server's {"message", "reason"} when it sent one, else a sentence naming the status."""
    try:
        raw = e.read()
    except OSError:
        raw = b""
    message = reason = None
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        message = doc.get("message") or None
        reason = doc.get("reason")
    if not message:
        message = f"HTTP {e.code} {e.reason} from {url}"
        if e.code == 404 and doc is None:
            message += ": is the jupyter-elastic-gpu server extension enabled?"
    if e.code == 401 or (e.code == 403 and reason is None):  # no user: the token is the cause
        message = f"{str(message).rstrip('.')}; {token_advice(url)}"
    return SchedulerError(str(message), e.code, reason)


def token_advice(url: str) -> str:
    """What to do when the scheduler at ``url`` refused the token (or got none)."""
    base = urllib.parse.urlunsplit((*urllib.parse.urlsplit(url)[:2], "", "", ""))
    return (
        f"the token was refused or missing: set {ENV_TOKEN} to a token of the server at "
        f"{base} (`jupyter server list` shows a Jupyter server's; JupyterHub gives one at "
        "/hub/token; a shared scheduler's admin gives one with `jupyter elastic-gpu scheduler "
        "add-user`)"
    )


def api_root(url: str) -> str:
    """The API root of a scheduler, from its API root or from its Jupyter server's URL (with
    any ``base_url``, as the browser shows it: ``http://host:8888/lab?token=...``)."""
    parts = urllib.parse.urlsplit(url.strip())
    path = parts.path or "/"
    marker = "/" + API_SUFFIX.rstrip("/")
    at = (path.rstrip("/") + "/").find(marker + "/")
    if at >= 0:
        path = path[: at + len(marker)] + "/"
    else:
        segments = [s for s in path.split("/") if s]
        for k, segment in enumerate(segments):
            if segment in _JUPYTER_PAGES:
                del segments[k:]
                break
        path = "/" + "".join(s + "/" for s in segments) + API_SUFFIX
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
