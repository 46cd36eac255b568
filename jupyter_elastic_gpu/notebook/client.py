"""The REST client every front end uses (CLI, the ``%%elastic_train`` magic, tests), and how a
process finds its scheduler without being told.

Standard library only and synchronous: it runs inside notebook kernels and short CLI calls,
where an extra dependency or an event loop costs more than it gives. The routes are those of
docs/api.md; every method returns the server's JSON document as is.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DAEMON_DISCOVERY_FILE = "jupyter-elastic-gpu-scheduler.json"
TOKEN_FILE = Path(".jupyter") / "elastic-gpu-token"
#: The API root under a server's base_url (``server/handlers.py`` serves it there).
API_SUFFIX = "elastic-gpu/api/"
#: A scheduler to use: its Jupyter server's URL or its API root; the token to send.
ENV_URL = "ELASTIC_GPU_URL"
ENV_TOKEN = "ELASTIC_GPU_TOKEN"
#: Where a shared scheduler announces itself (default: the temp dir).
ENV_DAEMON_DIR = "ELASTIC_GPU_DAEMON_DIR"
#: Path segments of Jupyter's own pages: a URL copied from the browser ends in one of them.
_JUPYTER_PAGES = {"lab", "tree", "notebooks", "edit", "view", "doc", "terminals", "api", "hub"}
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "*"}
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
        return self._request("GET", "whoami")

    def gpus(self) -> dict:
        return self._request("GET", "gpus")

    def jobs(self) -> dict:
        return self._request("GET", "jobs")

    def submit(self, body: dict) -> dict:
        return self._request("POST", "jobs", body=body)

    def job(self, job_id: str) -> dict:
        return self._request("GET", f"jobs/{_quote(job_id)}")

    def cancel(self, job_id: str) -> dict:
        return self._request("POST", f"jobs/{_quote(job_id)}/cancel", body={})

    def logs(self, job_id: str, tail: int = 200) -> dict:
        return self._request("GET", f"jobs/{_quote(job_id)}/logs", query={"tail": tail})

    def events(self, job_id: str) -> dict:
        return self._request("GET", f"jobs/{_quote(job_id)}/events")

    def progress(self, job_id: str, since: float | None = None) -> dict:
        query = {} if since is None else {"since": since}
        return self._request("GET", f"jobs/{_quote(job_id)}/progress", query=query)

    def queue(self) -> dict:
        return self._request("GET", "queue")

    def status(self) -> dict:
        return self._request("GET", "status")

    def launches(self) -> dict:
        return self._request("GET", "launches")

    def wait_updates(self, since: int, timeout: float) -> int:
        """Long poll: the state version once it passes ``since`` (or when the server's wait of
        ``timeout`` seconds ends, the current one)."""
        doc = self._request(
            "GET",
            "updates",
            query={"since": since, "timeout": timeout},
            timeout=timeout + self.timeout,
        )
        try:
            return int(doc["version"])
        except (KeyError, TypeError, ValueError):
            raise SchedulerError(
                f"the scheduler at {self.base_url} answered the long poll without a version: "
                f"{_snippet(json.dumps(doc))}"
            ) from None

    # -- HTTP ---------------------------------------------------------------------------------

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
            raise _http_error(e, url) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            # refused, DNS, TLS, timeout, a connection dropped mid-answer
            why = getattr(e, "reason", None) or e
            raise SchedulerError(
                f"cannot reach the scheduler at {url}: {why}; is JupyterLab "
                "(or `jupyter elastic-gpu scheduler`) running?"
            ) from None
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise SchedulerError(
                f"the server at {url} did not answer JSON (HTTP {status}): {_snippet(raw)}; is "
                "this the elastic-gpu API root?",
                status,
            ) from None


def _quote(job_id: str) -> str:
    return urllib.parse.quote(str(job_id), safe="")


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
        if e.code in (401, 403):
            message += f": the token was refused (check {ENV_TOKEN} or the token file)"
        elif e.code == 404 and doc is None:
            message += ": is the jupyter-elastic-gpu server extension enabled?"
    return SchedulerError(str(message), e.code, reason)


# -- discovery ----------------------------------------------------------------------------------


def daemon_discovery_path(environ: Mapping[str, str] = os.environ) -> Path:
    """The file where a running shared daemon announces ``{"url": api_root, "pid": int}``:
    in ``$ELASTIC_GPU_DAEMON_DIR``, else ``jupyter-elastic-gpu/`` in the system temp dir."""
    folder = environ.get(ENV_DAEMON_DIR)
    if folder:
        return Path(folder) / DAEMON_DISCOVERY_FILE
    return Path(tempfile.gettempdir()) / "jupyter-elastic-gpu" / DAEMON_DISCOVERY_FILE


def discover(environ: Mapping[str, str] = os.environ) -> Connection:
    """Find the scheduler this process should talk to, in this order:

    1. ``ELASTIC_GPU_URL`` (the Jupyter server's URL, as the browser shows it, or the API
       root) and ``ELASTIC_GPU_TOKEN`` (or a ``?token=`` in that URL) in the environment;
    2. the Jupyter server that started this process (a kernel, a terminal, or anything below
       them): the runtime file ``jpserver-<pid>.json`` of an ancestor or of ``JPY_PARENT_PID``;
    3. a shared daemon on this box (``daemon_discovery_path()``), with the user's token from
       ``ELASTIC_GPU_TOKEN`` or ``~/.jupyter/elastic-gpu-token``.

    Raises SchedulerError (status None) saying what was tried and how to fix it.
    """
    url = environ.get(ENV_URL, "").strip()
    if url:
        token = environ.get(ENV_TOKEN, "").strip() or _url_token(url) or _token_file(environ)
        return Connection(api_root(url), token, "environment")
    tried = [f"{ENV_URL} is not set"]

    found, note = _from_jupyter_server(environ)
    if found:
        return found
    tried.append(note)

    found, note = _from_daemon(environ)
    if found:
        return found
    tried.append(note)
    raise SchedulerError(
        "no elastic-gpu scheduler found (" + "; ".join(tried) + "). Run this inside JupyterLab "
        "(a notebook or a terminal), start the shared daemon with `jupyter elastic-gpu "
        f"scheduler`, or set {ENV_URL} (the server's URL) and {ENV_TOKEN}."
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


def _url_token(url: str) -> str | None:
    """A ``?token=`` in a URL copied from Jupyter's start-up message."""
    values = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("token")
    return values[0] if values else None


def _token_file(environ: Mapping[str, str]) -> str | None:
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    try:
        lines = (home / TOKEN_FILE).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return (lines[0].strip() or None) if lines else None


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's (a shared daemon usually is)
        return True
    except OSError:
        return False
    return True


def _parent(pid: int) -> int | None:
    """Parent pid from /proc (Linux), or from ``ps`` where there is no /proc (macOS)."""
    if os.path.isdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            return int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (OSError, IndexError, ValueError):
            return None
    try:
        out = subprocess.run(
            ["ps", "-o", "ppid=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout
        return int(out.strip())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _ancestors() -> Iterator[int]:
    pid, seen = os.getppid(), 0
    while pid and pid > 1 and seen < 64:
        yield pid
        seen += 1
        pid = _parent(pid)


def _runtime_dir(environ: Mapping[str, str]) -> Path | None:
    if environ.get("JUPYTER_RUNTIME_DIR"):
        return Path(environ["JUPYTER_RUNTIME_DIR"])
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        return None
    return Path(jupyter_runtime_dir())


def _from_jupyter_server(environ: Mapping[str, str]) -> tuple[Connection | None, str]:
    runtime = _runtime_dir(environ)
    if runtime is None:
        return None, "no Jupyter runtime dir (jupyter_core is not installed)"
    candidates = list(_ancestors())
    parent = environ.get("JPY_PARENT_PID", "")
    if parent.isdigit() and int(parent) not in candidates and _pid_alive(int(parent)):
        candidates.append(int(parent))
    skipped = []
    for pid in candidates:
        path = runtime / f"jpserver-{pid}.json"
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if info.get("sock"):
            skipped.append(f"{path.name} listens on a unix socket, which this client cannot use")
            continue
        url = _server_api_url(info)
        if url is None:
            skipped.append(f"{path.name} has no usable url")
            continue
        token = info.get("token") or environ.get("JUPYTERHUB_API_TOKEN") or None
        return Connection(url, token, "jupyter-server"), ""
    note = f"no Jupyter server among this process's parents ({runtime}/jpserver-<pid>.json)"
    return None, note + ("" if not skipped else ": " + ", ".join(skipped))


def _server_api_url(info: Mapping[str, Any]) -> str | None:
    """The API root of a Jupyter server from its runtime file.

    The file's ``url`` already holds ``base_url`` (jupyter_server's connection_url), so the
    path comes from ``base_url`` alone; a server listening on every interface is reached on
    loopback, which always works from the same box.
    """
    parts = urllib.parse.urlsplit(str(info.get("url") or ""))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    netloc = parts.netloc
    if str(info.get("hostname", "")) in _WILDCARD_HOSTS and info.get("port"):
        loopback = "[::1]" if info.get("hostname") == "::" else "127.0.0.1"
        netloc = f"{loopback}:{info['port']}"
    base = "/" + str(info.get("base_url") or parts.path or "/").strip("/") + "/"
    base = base.replace("//", "/")
    return f"{parts.scheme}://{netloc}{base}{API_SUFFIX}"


def _from_daemon(environ: Mapping[str, str]) -> tuple[Connection | None, str]:
    path = daemon_discovery_path(environ)
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        return None, f"no shared daemon ({path} does not exist)"
    except (OSError, ValueError) as e:
        return None, f"no shared daemon ({path} is unreadable: {e})"
    url, pid = info.get("url") if isinstance(info, dict) else None, None
    if isinstance(info, dict) and isinstance(info.get("pid"), int):
        pid = info["pid"]
    if not url or pid is None:
        return None, f"no shared daemon ({path} lacks url or pid)"
    if not _pid_alive(pid):
        return None, f"no shared daemon ({path} names pid {pid}, which is not running)"
    token = environ.get(ENV_TOKEN, "").strip() or _token_file(environ)
    if not token:
        raise SchedulerError(
            f"found the shared scheduler at {url} but no token for you: set {ENV_TOKEN} "
            f"or put your token in ~/{TOKEN_FILE} (an admin creates one with `jupyter "
            "elastic-gpu scheduler add-user NAME`)"
        )
    return Connection(api_root(str(url)), token, "daemon"), ""
