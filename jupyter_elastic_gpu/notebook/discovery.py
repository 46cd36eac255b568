"""How a process finds its scheduler without being told, and which token it may send there.

In this order: the environment (``ELASTIC_GPU_URL``), the Jupyter server that started this
process (its runtime file), or a shared scheduler's discovery file. A token goes only to the
scheduler it belongs to: a discovery file is written in a shared folder, so it names a URL
and nothing more; the user's token file (``~/.jupyter/elastic-gpu-token``) records that
scheduler's URL with the token, and a discovered URL that is not that one gets no token
(docs/security.md). Standard library only, like the client.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .client import API_SUFFIX, ENV_TOKEN, ENV_URL, Connection, SchedulerError, api_root

DAEMON_DISCOVERY_FILE = "jupyter-elastic-gpu-scheduler.json"
TOKEN_FILE = Path(".jupyter") / "elastic-gpu-token"
#: Where a shared scheduler announces itself (default: the temp dir).
ENV_DAEMON_DIR = "ELASTIC_GPU_DAEMON_DIR"
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "*"}
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


# -- the token file -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenFile:
    """``~/.jupyter/elastic-gpu-token``: ``url=`` (the scheduler the token belongs to) and
    ``token=`` lines, as ``jupyter elastic-gpu scheduler add-user`` prints them. An older
    file holds the token alone on its first line: then ``url`` is None."""

    token: str | None
    url: str | None


def token_file_text(url: str, token: str) -> str:
    """The token file's content for ``token`` of the scheduler at ``url``."""
    return f"url={api_root(url)}\ntoken={token}\n"


def read_token_file(environ: Mapping[str, str] = os.environ) -> TokenFile:
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    try:
        lines = [line.strip() for line in (home / TOKEN_FILE).read_text().splitlines()]
    except (OSError, UnicodeDecodeError):
        return TokenFile(None, None)
    keyed = dict(line.split("=", 1) for line in lines if line.startswith(("url=", "token=")))
    if keyed:
        return TokenFile(keyed.get("token", "").strip() or None, keyed.get("url") or None)
    first = next((line for line in lines if line and not line.startswith("#")), "")
    return TokenFile(first or None, None)


def same_scheduler(a: str, b: str) -> bool:
    """Whether two URLs name the same API root (scheme and host compared case-blind; the
    names of this box's loopback interface are one host)."""

    def key(url: str) -> tuple:
        parts = urllib.parse.urlsplit(api_root(url))
        scheme = parts.scheme.lower()
        try:
            port = parts.port or {"http": 80, "https": 443}.get(scheme)
        except ValueError:
            port = None
        host = (parts.hostname or "").lower()
        return scheme, "loopback" if host in _LOOPBACK else host, port, parts.path

    return key(a) == key(b)


# -- where to look ------------------------------------------------------------------------------


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
       root) and ``ELASTIC_GPU_TOKEN`` (or a ``?token=`` in that URL, or the token file's
       token when the file names this URL or no URL at all) in the environment;
    2. the Jupyter server that started this process (a kernel, a terminal, or anything below
       them): the runtime file ``jpserver-<pid>.json`` of an ancestor or of ``JPY_PARENT_PID``;
    3. a shared daemon on this box (``daemon_discovery_path()``), with the token of
       ``~/.jupyter/elastic-gpu-token`` when that file names the announced URL (never
       ``ELASTIC_GPU_TOKEN`` alone: that one goes only to a URL the user named).

    Raises SchedulerError (status None) saying what was tried and how to fix it.
    """
    url = environ.get(ENV_URL, "").strip()
    if url:
        token = environ.get(ENV_TOKEN, "").strip() or _url_token(url)
        if not token:
            saved = read_token_file(environ)
            token = saved.token if saved.url is None or same_scheduler(saved.url, url) else None
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


def _url_token(url: str) -> str | None:
    """A ``?token=`` in a URL copied from Jupyter's start-up message."""
    values = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get("token")
    return values[0] if values else None


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


def _server_files(runtime: Path, environ: Mapping[str, str]) -> Iterator[tuple[Path, dict]]:
    """(runtime file, its content) of each Jupyter server among this process's parents."""
    candidates = list(_ancestors())
    parent = environ.get("JPY_PARENT_PID", "")
    if parent.isdigit() and int(parent) not in candidates and _pid_alive(int(parent)):
        candidates.append(int(parent))
    for pid in candidates:
        path = runtime / f"jpserver-{pid}.json"
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            yield path, info


def server_root(environ: Mapping[str, str] = os.environ) -> str | None:
    """The ``root_dir`` of the Jupyter server that started this process (its runtime file),
    which the paths of its file browser are relative to; None when there is none."""
    runtime = _runtime_dir(environ)
    for _, info in _server_files(runtime, environ) if runtime else ():
        if isinstance(info.get("root_dir"), str):
            return info["root_dir"]
    return None


def _from_jupyter_server(environ: Mapping[str, str]) -> tuple[Connection | None, str]:
    runtime = _runtime_dir(environ)
    if runtime is None:
        return None, "no Jupyter runtime dir (jupyter_core is not installed)"
    skipped = []
    for path, info in _server_files(runtime, environ):
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


# -- the shared daemon's discovery file ----------------------------------------------------------


def untrusted_announcement(path: Path) -> str | None:
    """Why the discovery file ``path`` cannot be trusted to name the shared scheduler, or None.

    Only a regular file (not a link) that nobody but its owner may change, in a folder nobody
    but its owner may change, is read: anyone else could have written or replaced it."""
    try:
        folder = path.parent.stat()
        st = path.lstat()
    except OSError:
        return None  # missing: said by the reader
    if folder.st_mode & 0o022:
        return (
            f"its folder {path.parent} is writable by other users, so anyone could have "
            "written it (a current scheduler makes it 0755; restart it, or set "
            f"{ENV_DAEMON_DIR} to a folder only its account writes)"
        )
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_mode & 0o022:
        return "it is writable by other users, so anyone could have written it"
    return None


def _from_daemon(environ: Mapping[str, str]) -> tuple[Connection | None, str]:
    path = daemon_discovery_path(environ)
    problem = untrusted_announcement(path)
    if problem:
        return None, f"ignored {path}: {problem}"
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        return None, f"no shared daemon ({path} does not exist)"
    except (OSError, ValueError) as e:
        return None, f"no shared daemon ({path} is unreadable: {e})"
    url, pid = info.get("url") if isinstance(info, dict) else None, None
    if isinstance(info, dict) and isinstance(info.get("pid"), int):
        pid = info["pid"]
    if not url or not isinstance(url, str) or pid is None:
        return None, f"no shared daemon ({path} lacks url or pid)"
    if not _pid_alive(pid):
        return None, f"no shared daemon ({path} names pid {pid}, which is not running)"
    url = api_root(url)
    saved = read_token_file(environ)
    lines = "the url= and token= lines `jupyter elastic-gpu scheduler add-user` printed"
    if not saved.token:
        alone = (
            f"; {ENV_TOKEN} alone is never sent to a discovered scheduler: set {ENV_URL}={url} "
            "too if this is yours"
            if environ.get(ENV_TOKEN, "").strip()
            else ""
        )
        raise SchedulerError(
            f"found the shared scheduler at {url} but no token for you: put {lines} in "
            f"~/{TOKEN_FILE} (an admin creates them with `jupyter elastic-gpu scheduler "
            f"add-user NAME`), or set {ENV_URL} and {ENV_TOKEN}{alone}"
        )
    if saved.url is None:
        raise SchedulerError(
            f"found a shared scheduler announced at {url} in {path}, but ~/{TOKEN_FILE} does "
            "not say which scheduler its token belongs to, so it is not sent to one found "
            f"this way: add the line `url=<your scheduler's URL>` to it ({lines}), or set "
            f"{ENV_URL} to your scheduler's URL"
        )
    if not same_scheduler(saved.url, url):
        raise SchedulerError(
            f"{path} announces a scheduler at {url}, but your token belongs to {saved.url} "
            f"(~/{TOKEN_FILE}), so it was not sent: set {ENV_URL}={saved.url} to use yours; "
            "if your scheduler moved, ask your admin for its URL and update the url= line; "
            "otherwise tell your admin, the announcement may be forged"
        )
    return Connection(url, saved.token, "daemon"), ""
