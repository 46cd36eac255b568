"""`jupyter elastic-gpu scheduler`: one scheduler for a shared box without JupyterHub.

It serves the same routes as the embedded scheduler under ``/api/``, on its own port. Each
user's Jupyter server points at it (``c.ElasticGPUApp.scheduler_url``) with that user's token
and starts the sidecars of that user's jobs, so trainers run as the user who submitted them.
Users see their own jobs in full, other users' only as owner, size and state.

Tokens live in a JSON file the daemon owns (``{"<token>": {"user": "ann", "admin": false}}``);
``jupyter elastic-gpu scheduler add-user ann`` adds one and prints it. The daemon writes a
discovery file (URL and pid, no secrets) so that clients on the box can find it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
from pathlib import Path
from typing import Any

import tornado.web
from tornado.httpserver import HTTPServer

from ..core.policies import POLICIES
from ..notebook.client import daemon_discovery_path
from .backends import ApiError, LocalBackend
from .inventory import detect
from .routes import ROUTES
from .service import Principal, SchedulerService, ServiceConfig
from .store import Store

log = logging.getLogger("jupyter_elastic_gpu")


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "jupyter-elastic-gpu"


def default_tokens_file() -> Path:
    return default_state_dir() / "tokens.json"


class TokenFile:
    """token -> {"user", "admin"}; re-read when the file changes, so add-user needs no restart."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime = -1.0
        self._tokens: dict[str, dict[str, Any]] = {}

    def lookup(self, token: str) -> Principal | None:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        if mtime != self._mtime:
            self._tokens = json.loads(self.path.read_text() or "{}")
            self._mtime = mtime
        entry = self._tokens.get(token)
        if not entry:
            return None
        return Principal(entry["user"], bool(entry.get("admin")))

    def add(self, user: str, admin: bool = False) -> str:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tokens = json.loads(self.path.read_text() or "{}") if self.path.exists() else {}
        token = secrets.token_urlsafe(24)
        tokens[token] = {"user": user, "admin": admin}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(tokens, indent=1))
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)
        return token


class _DaemonHandler(tornado.web.RequestHandler):
    """Per-user token authentication for every route but the sidecar heartbeat."""

    def initialize(self, backend: LocalBackend, tokens: TokenFile) -> None:
        self.backend, self.tokens = backend, tokens

    async def principal(self) -> Principal:
        header = self.request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        token = token.strip() if scheme.lower() == "token" else self.get_query_argument("token", "")
        who = self.tokens.lookup(token) if token else None
        if who is None:
            self.fail(
                ApiError(
                    401,
                    "a valid per-user token is needed: 'Authorization: token <t>' "
                    "(the admin creates one with `jupyter elastic-gpu scheduler add-user`)",
                    "unauthorized",
                )
            )
            raise tornado.web.Finish()
        return who

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": self._reason, "reason": "error"}))


def make_app(backend: LocalBackend, tokens: TokenFile) -> tornado.web.Application:
    routes = []
    for route, mixin in ROUTES:
        cls = type(f"Daemon{mixin.__name__}", (mixin, _DaemonHandler), {})
        routes.append((f"/api/{route}", cls, {"backend": backend, "tokens": tokens}))
    return tornado.web.Application(routes)


async def serve(args: argparse.Namespace) -> None:
    state = Path(args.state_dir)
    tokens = TokenFile(Path(args.tokens_file) if args.tokens_file else state / "tokens.json")
    inventory, source = detect(args.simulated_gpus)
    store = await Store.open(args.db or str(state / "scheduler.sqlite"))
    api = f"http://{args.ip}:{args.port}/api/"

    class AgentLauncher:
        """The daemon starts nothing: each user's server does (see scheduler/agent.py)."""

        async def launch(self, request: Any) -> dict[str, Any]:
            return {"via": "agent"}

        def alive(self, record: dict[str, Any]) -> bool | None:
            return None

    config = ServiceConfig(
        policy=args.policy,
        tick_s=args.tick,
        heartbeat_timeout_s=args.heartbeat_timeout,
        job_root=args.job_root,
        user_gpu_cap=args.user_gpu_cap,
        simulated=source == "simulated",
        remote_inputs=True,
    )
    service = SchedulerService(
        store, inventory, AgentLauncher(), lambda job_id: f"{api}sidecar/{job_id}/heartbeat", config
    )
    await service.start()
    server = HTTPServer(make_app(LocalBackend(service, mode="daemon"), tokens))
    server.listen(args.port, args.ip)
    discovery = daemon_discovery_path()
    discovery.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(discovery.parent, 0o1777)
    discovery.write_text(json.dumps({"url": api, "pid": os.getpid()}))
    log.warning(
        "jupyter-elastic-gpu scheduler at %s (%d %s GPUs, policy %s)",
        api,
        len(inventory.snapshot()),
        source,
        args.policy,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.stop()
    await service.stop()
    await store.close()
    with contextlib.suppress(OSError):
        if json.loads(discovery.read_text()).get("pid") == os.getpid():
            discovery.unlink()


def add_scheduler_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "scheduler",
        help="run the shared scheduler daemon of this box",
        description="Run one scheduler for every user of this box. Each user's Jupyter server "
        "connects with c.ElasticGPUApp.scheduler_url and a per-user token.",
    )
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9111)
    p.add_argument(
        "--state-dir", default=str(default_state_dir()), help="database and token file live here"
    )
    p.add_argument("--db", help="SQLite file (default STATE_DIR/scheduler.sqlite)")
    p.add_argument("--tokens-file", help="per-user tokens (default STATE_DIR/tokens.json)")
    p.add_argument(
        "--simulated-gpus",
        type=int,
        default=0,
        help="N simulated GPUs; 0 finds them with NVML (4 simulated without a driver)",
    )
    p.add_argument("--policy", default="adaptive", choices=sorted(POLICIES))
    p.add_argument("--tick", type=float, default=60.0)
    p.add_argument("--heartbeat-timeout", type=float, default=30.0)
    p.add_argument("--user-gpu-cap", type=int, default=0)
    p.add_argument(
        "--job-root",
        default="~{user}/.local/share/jupyter/elastic-gpu/jobs",
        help="job directories ({user} is replaced; a user without a home on this box gets "
        "one under the temp dir)",
    )
    p.set_defaults(func=run_daemon)
    actions = p.add_subparsers(dest="scheduler_action", metavar="ACTION")
    add = actions.add_parser("add-user", help="create a token for a user and print it")
    add.add_argument("user")
    add.add_argument("--admin", action="store_true", help="may see and steer every job")
    add.add_argument("--state-dir", default=str(default_state_dir()))
    add.add_argument("--tokens-file")
    add.set_defaults(func=run_add_user)


def run_daemon(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s] %(message)s")
    asyncio.run(serve(args))
    return 0


def run_add_user(args: argparse.Namespace) -> int:
    path = Path(args.tokens_file) if args.tokens_file else Path(args.state_dir) / "tokens.json"
    print(TokenFile(path).add(args.user, args.admin))
    return 0
