"""``jupyter elastic-gpu scheduler``: one scheduler for every user of a shared box.

It is the extension itself, run standalone: the same handlers, the same service and the same
settings (``c.SchedulerService``), on a Jupyter server that serves nothing else (no kernels,
no files, no terminals) and authenticates each user by a per-user token
(``TokenFileIdentityProvider``). Each user's Jupyter server points at it
(``c.ElasticGPUApp.scheduler_url``) and starts the sidecars of its own user's jobs, so
trainers run as the user who submitted them. Users see their own jobs in full, other users'
only as owner, size and state.

``jupyter elastic-gpu scheduler add-user NAME`` adds a token and prints it with the
scheduler's URL, as the lines of the user's token file. The scheduler writes a discovery file
(URL and pid, no secrets) so that clients on the box can find it, in a folder of its own that
only its account may write (``announce``); clients send a token to the URL it names only when
the user's token file names that URL too (``notebook/discovery.py``, docs/security.md).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any, ClassVar

from jupyter_core.application import JupyterApp
from jupyter_server.serverapp import ServerApp
from traitlets import Bool, Float, Unicode, default, validate

from ..notebook.client import api_root
from ..notebook.discovery import daemon_discovery_path, token_file_text
from ..scheduler.execution.launcher import AgentLauncher
from ..scheduler.storage import ownfiles
from .extension import ElasticGPUApp
from .identity import TOKENS_FILE, TokenFile, TokenFileIdentityProvider

#: This module is the shared scheduler's Jupyter extension package.
PACKAGE = __name__


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": PACKAGE, "app": SchedulerDaemonApp}]


#: The file of the state dir where the scheduler records the URL it serves (for add-user).
URL_FILE = "url"
#: Where users reach a scheduler nobody told add-user about (DaemonServerApp's defaults).
DEFAULT_URL = "http://127.0.0.1:9111/"


def announce(path: Path, doc: dict[str, Any]) -> str | None:
    """Write the discovery file ``path`` (no secret in it); the problem when it cannot be.

    Its folder is this account's own and writable by nobody else (created 0755, or made so):
    a folder another user owns is not written into, since they could replace what is
    announced there. The file is replaced whole, never through a link."""
    folder = path.parent
    with contextlib.suppress(FileExistsError):
        folder.mkdir(parents=True, mode=0o755)
    try:
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode):
            return f"{folder} is not a folder"
        if st.st_uid != os.geteuid():
            return (
                f"{folder} belongs to uid {st.st_uid}, not to this scheduler's account: remove "
                f"it, or set $ELASTIC_GPU_DAEMON_DIR to a folder of this account"
            )
        if stat.S_IMODE(st.st_mode) != 0o755:  # an older version made it 1777; a umask 0700
            os.chmod(folder, 0o755, follow_symlinks=False)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            ownfiles.write_file(fd, path.name, json.dumps(doc).encode(), mode=0o644)
        finally:
            os.close(fd)
    except OSError as e:
        return f"cannot write {path}: {e}"
    return None


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "jupyter-elastic-gpu"


class DaemonServerApp(ServerApp):
    """A Jupyter server that serves the scheduler's API and nothing else."""

    name = "jupyter-elastic-gpu-scheduler"
    default_services = ()  # no kernels, contents, files, sessions, terminals ...

    idle_connection_timeout = Float(
        60.0,
        config=True,
        help="Seconds a connection may stay open without a whole request's headers (an idle "
        "keep-alive connection, or half a request); then it is closed. Every user shares this "
        "server: half-open connections would otherwise hold its sockets for an hour.",
    )
    body_timeout = Float(
        60.0,
        config=True,
        help="Seconds a request's body may take to arrive; then the connection is closed.",
    )

    @validate("idle_connection_timeout", "body_timeout")
    def _check_timeout(self, proposal: Any) -> float:
        value = proposal["value"]
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(
                f"{proposal['trait'].name} must be a positive number of seconds, got {value}"
            )
        return value

    def init_httpserver(self) -> None:
        super().init_httpserver()
        # ServerApp passes HTTPServer no timeouts (tornado_settings reach the web app only):
        # they are the connections' parameters, which every new connection reads.
        params = self.http_server.conn_params
        params.header_timeout = self.idle_connection_timeout
        params.body_timeout = self.body_timeout

    @default("identity_provider_class")
    def _default_identity_provider_class(self) -> type:
        return TokenFileIdentityProvider

    @default("port")
    def _default_port(self) -> int:
        return 9111

    @default("allow_root")
    def _default_allow_root(self) -> bool:
        return True  # it runs no user code (no kernels, no terminals); a service account is better

    def init_server_extensions(self) -> None:
        # Only the scheduler: the extensions enabled for users' servers (JupyterLab, the
        # personal scheduler ...) have no business in this process.
        self.jpserver_extensions = {PACKAGE: True}
        super().init_server_extensions()


class SchedulerDaemonApp(ElasticGPUApp):
    """The shared scheduler; every ElasticGPUApp and SchedulerService setting applies."""

    name = "elastic_gpu_scheduler"
    description = "One elastic-gpu scheduler for every user of this box"
    mode = "daemon"
    load_other_extensions = False
    serverapp_class = DaemonServerApp
    serverapp_config: ClassVar[dict] = {"open_browser": False}
    how_to_authenticate = (
        "a valid per-user token is needed: 'Authorization: token <t>' (an admin creates one "
        "with `jupyter elastic-gpu scheduler add-user NAME`)"
    )
    # (its server's class, whose options the help lists: --idle-connection-timeout is one)
    classes: ClassVar[list] = [
        DaemonServerApp,
        *(c for c in ElasticGPUApp.classes if c is not ServerApp),
        TokenFileIdentityProvider,
    ]

    state_dir = Unicode(
        config=True,
        help="Folder of the database and the token file (default: "
        "$XDG_STATE_HOME/jupyter-elastic-gpu).",
    )
    discovery = Bool(
        True,
        config=True,
        help="Announce the scheduler's URL (no secrets) in a file local clients look for.",
    )

    aliases: ClassVar[dict] = {
        "ip": "ServerApp.ip",
        "port": "ServerApp.port",
        "state-dir": "SchedulerDaemonApp.state_dir",
        "db": "SchedulerDaemonApp.db_path",
        "tokens-file": "TokenFileIdentityProvider.tokens_file",
        "simulated-gpus": "SchedulerDaemonApp.simulated_gpus",
        "dcgm-exporter": "SchedulerDaemonApp.dcgm_exporter_url",
        "policy": "SchedulerService.policy",
        "tick": "SchedulerService.tick_interval",
        "heartbeat-timeout": "SchedulerService.heartbeat_timeout",
        "user-gpu-cap": "SchedulerService.user_gpu_cap",
        "job-root": "SchedulerService.job_root",
        "fair-share-half-life": "SchedulerService.fair_share_half_life",
        "server-timeout": "SchedulerService.server_timeout",
        "idle-connection-timeout": "DaemonServerApp.idle_connection_timeout",
    }
    subcommands: ClassVar[dict] = {
        "add-user": (
            "jupyter_elastic_gpu.server.daemon.AddUserApp",
            "Create a token for a user and print it.",
        )
    }

    @classmethod
    def get_extension_package(cls) -> str:
        return PACKAGE

    @default("state_dir")
    def _default_state_dir(self) -> str:
        return str(default_state_dir())

    @default("db_path")
    def _db_path(self) -> str:
        return str(Path(self.state_dir) / "scheduler.sqlite")

    @default("launcher_class")
    def _default_launcher_class(self) -> type:
        return AgentLauncher

    def service_defaults(self) -> dict[str, Any]:
        if self.cluster_backend != "local":  # job dirs on the cluster's shared storage
            return {}
        # Each user's job dirs live in their home, where their own server writes the files.
        return {"job_root": "~{user}/.local/share/jupyter/elastic-gpu/jobs"}

    def initialize_settings(self) -> None:
        super().initialize_settings()
        Path(self.state_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        provider = self.serverapp.identity_provider
        if isinstance(provider, TokenFileIdentityProvider) and not provider.tokens_file:
            provider.tokens_file = str(Path(self.state_dir) / TOKENS_FILE)

    #: Why the scheduler could not start, if it could not: ``main`` exits non-zero with it.
    failure: ClassVar[str] = ""

    def _link_jupyter_server_extension(self, serverapp: Any) -> None:
        """A refused setting stops the shared scheduler before it serves: Jupyter's loader
        would go on with the defaults (another state folder and database than asked)."""
        try:
            super()._link_jupyter_server_extension(serverapp)
        except Exception as e:
            reason = f"{type(e).__name__}: {e}"
            self.log.critical("jupyter-elastic-gpu scheduler cannot start: %s", reason)
            raise SystemExit(f"jupyter-elastic-gpu scheduler: error: {reason}") from None

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """A shared scheduler that cannot start (its database damaged, held by another
        scheduler, not writable ...) stops with the reason rather than answer 503 to all."""
        try:
            await super()._start_jupyter_server_extension(serverapp)
        except Exception as e:
            reason = getattr(e, "message", "") or f"{type(e).__name__}: {e}"
            self.log.critical("jupyter-elastic-gpu scheduler cannot start: %s", reason)
            SchedulerDaemonApp.failure = reason
            serverapp.stop()

    async def _start_backend(self) -> None:
        await super()._start_backend()
        with contextlib.suppress(OSError):  # for add-user: the URL to give users
            (Path(self.state_dir) / URL_FILE).write_text(self.api_url() + "\n")
        if self.discovery:
            problem = announce(daemon_discovery_path(), {"url": self.api_url(), "pid": os.getpid()})
            if problem:
                self.log.warning("elastic-gpu: not announcing the scheduler: %s", problem)
        self.log.warning(
            "jupyter-elastic-gpu scheduler at %s (state in %s)", self.api_url(), self.state_dir
        )

    async def stop_extension(self) -> None:
        await super().stop_extension()
        path = daemon_discovery_path()
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if path.parent.lstat().st_uid != os.geteuid():
                return
            raw = ownfiles.read_regular(path.parent, path.name, 64 * 1024) or b"{}"
            if json.loads(raw).get("pid") == os.getpid():
                path.unlink()


class AddUserApp(JupyterApp):
    """``jupyter elastic-gpu scheduler add-user NAME [--admin]``: print a new token, as the
    lines of the user's ``~/.jupyter/elastic-gpu-token`` (the scheduler's URL, the token)."""

    name = "jupyter-elastic-gpu-scheduler-add-user"
    description = "Create a token for a user of the shared scheduler and print it."
    admin = Bool(False, config=True, help="The user may see and steer every job.")
    state_dir = Unicode(config=True, help="The shared scheduler's state dir.")
    tokens_file = Unicode(config=True, help="The token file (default STATE_DIR/tokens.json).")
    url = Unicode(
        config=True,
        help="The scheduler's URL as users reach it, recorded with the token (default: the "
        f"URL the scheduler last served, from STATE_DIR/{URL_FILE}, else {DEFAULT_URL}).",
    )
    flags: ClassVar[dict] = {
        "admin": ({"AddUserApp": {"admin": True}}, "may see and steer every job")
    }
    aliases: ClassVar[dict] = {
        "state-dir": "AddUserApp.state_dir",
        "tokens-file": "AddUserApp.tokens_file",
        "url": "AddUserApp.url",
    }

    @default("state_dir")
    def _default_state_dir(self) -> str:
        return str(default_state_dir())

    def start(self) -> None:
        if len(self.extra_args) != 1:
            self.exit("usage: jupyter elastic-gpu scheduler add-user NAME [--admin]")
        path = Path(self.tokens_file or Path(self.state_dir) / TOKENS_FILE)
        user = self.extra_args[0]
        url = self.url
        if not url:
            with contextlib.suppress(OSError):
                url = (Path(self.state_dir) / URL_FILE).read_text().strip()
        url = api_root(url or DEFAULT_URL)
        token = TokenFile(path).add(user, self.admin)
        print(token_file_text(url, token), end="")
        print(
            f"{user}'s token for the shared scheduler at {url}. The two lines above are "
            f"{user}'s ~/.jupyter/elastic-gpu-token (mode 0600; e.g. `... add-user {user} > "
            "FILE`): the CLI sends the token only to that URL. For their Jupyter server: "
            f"c.ElasticGPUApp.scheduler_url = '{url}' and c.ElasticGPUApp.scheduler_token "
            "= the token.",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> None:
    SchedulerDaemonApp.launch_instance(argv)
    if SchedulerDaemonApp.failure:
        sys.exit(f"jupyter-elastic-gpu scheduler: error: {SchedulerDaemonApp.failure}")


__all__ = ["SchedulerDaemonApp", "main"]
