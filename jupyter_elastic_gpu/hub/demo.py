"""``jupyter elastic-gpu hub-demo``: a real JupyterHub on this machine with the scheduler as
its service, on simulated GPUs, to try the multi-user setup in one command.

It writes a ``jupyterhub_config.py`` (the same settings as ``examples/jupyterhub_config.py``:
the service, its scopes and roles, hub mode for users' servers) into a state folder and runs
JupyterHub there: configurable-http-proxy in front, users' servers as local processes of this
account (JupyterHub's ``simple`` spawner: a demo, no isolation between users), and
JupyterHub's ``shared-password`` authenticator with one password for the users ``alice`` and
``bob`` and ``admin``, the scheduler's admin (its group's scopes; not the Hub's admin, whom
that authenticator would give a password of its own). Users' servers may take minutes to
start on a busy machine: the Hub waits for them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..scheduler.execution.gpukinds import parse_simulated
from . import scopes

#: The demo's users, and its admin (member of the ``ADMINS_GROUP`` group).
USERS = ("alice", "bob")
ADMIN_USER = "admin"
ADMINS_GROUP = "elastic-gpu-admins"
PROXY = "configurable-http-proxy"
#: Seconds a user's server may take to start and to answer (JupyterHub's defaults, 60 and 30,
#: were not enough on a busy 2-core machine).
SLOW_START_S = 120
#: The shortest password JupyterHub's SharedPasswordAuthenticator takes for users.
MIN_PASSWORD = 8


def demo_password(value: str) -> str:
    """``--password``, refused at once when the Hub would refuse it at start."""
    if len(value) < MIN_PASSWORD:
        raise argparse.ArgumentTypeError(
            f"give at least {MIN_PASSWORD} characters (JupyterHub's shared-password "
            f"authenticator takes no shorter one), not {len(value)}"
        )
    return value


def add_hub_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "hub-demo",
        help="start a local JupyterHub with the scheduler as its service (simulated GPUs)",
        description="Start a real JupyterHub on this machine (configurable-http-proxy, users' "
        "servers as local processes, one shared password) with the elastic-gpu service on "
        "simulated GPUs. Users alice and bob, and admin, the scheduler's admin. Ctrl-C stops "
        "it. A demo: every user's server runs as this account.",
    )
    p.add_argument("--port", type=int, default=8000, help="the Hub's port (default 8000)")
    p.add_argument("--ip", default="127.0.0.1", help="the Hub's address (default 127.0.0.1)")
    p.add_argument(
        "--simulated-gpus",
        default="4",
        metavar="N",
        help="GPUs to simulate: a count (default 4) or counts of kinds, such as 2xA100-80GB,2xT4",
    )
    p.add_argument(
        "--password",
        required=True,
        type=demo_password,
        help=f"the password of every demo user (at least {MIN_PASSWORD} characters)",
    )
    p.add_argument(
        "--state-dir",
        help="folder of the Hub's and the scheduler's state (default: a temporary folder, "
        "removed at the end)",
    )
    p.add_argument(
        "--extra-config",
        metavar="FILE",
        help="a jupyterhub_config.py run after the demo's settings, with the same `c` (to "
        "change them)",
    )
    p.set_defaults(func=run_hub_demo)


def missing() -> str | None:
    """What to install before the demo can run, if anything."""
    if importlib.util.find_spec("jupyterhub") is None:
        return "JupyterHub is not installed: pip install 'jupyter-elastic-gpu[hub]'"
    if shutil.which(PROXY) is None:
        return (
            f"{PROXY} is not on PATH: install it with `npm install -g {PROXY}` (Node.js: "
            "`apt-get install nodejs npm`), or `npm install --prefix DIR` and add "
            "DIR/node_modules/.bin to PATH"
        )
    return None


def free_port(ip: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def demo_settings(
    state: Path, port: int, gpus: int, password: str, ip: str = "127.0.0.1"
) -> dict[str, Any]:
    """{``Class.trait``: value} of the demo Hub (the service and its roles as in
    examples/jupyterhub_config.py)."""
    service_url = f"http://127.0.0.1:{free_port()}"
    python = sys.executable
    return {
        "JupyterHub.ip": ip,
        "JupyterHub.port": port,
        "JupyterHub.hub_ip": "127.0.0.1",
        "JupyterHub.hub_port": free_port(),
        "ConfigurableHTTPProxy.api_url": f"http://127.0.0.1:{free_port()}",
        "ConfigurableHTTPProxy.pid_file": str(state / "proxy.pid"),
        "JupyterHub.db_url": f"sqlite:///{state / 'jupyterhub.sqlite'}",
        "JupyterHub.cookie_secret_file": str(state / "jupyterhub_cookie_secret"),
        "JupyterHub.authenticator_class": "shared-password",
        "SharedPasswordAuthenticator.user_password": password,
        "Authenticator.allowed_users": {*USERS, ADMIN_USER},
        "JupyterHub.spawner_class": "simple",
        "Spawner.start_timeout": SLOW_START_S,
        "Spawner.http_timeout": SLOW_START_S,
        "SimpleLocalProcessSpawner.home_dir_template": str(state / "home" / "{username}"),
        "Spawner.cmd": [python, "-m", "jupyterhub.singleuser"],
        # Every demo server runs as this account: as root too, if that is who runs the demo.
        "Spawner.args": ["--allow-root"] if os.geteuid() == 0 else [],
        "Spawner.default_url": "/lab",
        # Users' servers forward to the service (hub mode), with these scopes in their token.
        "Spawner.environment": {scopes.ENV_SERVICE_URL: f"{service_url}/services/elastic-gpu/"},
        "Spawner.server_token_scopes": scopes.server_token_scopes(),
        "JupyterHub.custom_scopes": scopes.custom_scopes(),
        "JupyterHub.load_groups": {ADMINS_GROUP: {"users": [ADMIN_USER]}},
        "JupyterHub.load_roles": [
            {"name": "user", "scopes": ["self", scopes.ACCESS, scopes.SUBMIT]},
            {
                "name": "elastic-gpu-admins",
                "groups": [ADMINS_GROUP],
                "scopes": [scopes.ACCESS, scopes.SUBMIT, scopes.READ_ALL, scopes.ADMIN],
            },
            {
                "name": "elastic-gpu-service",
                "services": [scopes.SERVICE_NAME],
                "scopes": list(scopes.SERVICE_ROLE_SCOPES),
            },
        ],
        "JupyterHub.services": [
            {
                "name": scopes.SERVICE_NAME,
                "url": service_url,
                "display": True,
                "oauth_no_confirm": True,
                "oauth_client_allowed_scopes": scopes.oauth_client_allowed_scopes(),
                "command": [
                    python,
                    "-m",
                    "jupyter_elastic_gpu.cli",
                    "hub-service",
                    f"--simulated-gpus={gpus}",
                    f"--state-dir={state / 'elastic-gpu'}",
                    f"--SchedulerService.job_root={state / 'jobs' / '{user}'}",
                ],
            }
        ],
    }


def config_text(settings: dict[str, Any], extra: str | None = None) -> str:
    lines = ["# Written by `jupyter elastic-gpu hub-demo`.", "c = get_config()  # noqa", ""]
    lines += [f"c.{key} = {value!r}" for key, value in settings.items()]
    if extra:
        path = str(Path(extra).resolve())  # run here, so that it may change what is above
        lines += [
            "",
            f"with open({path!r}) as f:",
            f"    exec(compile(f.read(), {path!r}, 'exec'))",
        ]
    return "\n".join(lines) + "\n"


def run_hub_demo(args: argparse.Namespace) -> int:
    problem = missing()
    if problem:
        raise OSError(problem)
    try:
        kinds = parse_simulated(args.simulated_gpus)
    except ValueError as e:
        raise ValueError(f"--simulated-gpus: {e}") from None
    if not kinds:
        raise ValueError("--simulated-gpus must be at least 1")
    temporary = args.state_dir is None
    state = Path(args.state_dir or tempfile.mkdtemp(prefix="elastic-gpu-hub-demo-")).resolve()
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    config = state / "jupyterhub_config.py"
    settings = demo_settings(state, args.port, args.simulated_gpus, args.password, args.ip)
    config.write_text(config_text(settings, args.extra_config))
    url = f"http://{'127.0.0.1' if args.ip in ('', '0.0.0.0') else args.ip}:{args.port}/"
    print(
        f"JupyterHub with elastic-gpu on {len(kinds)} simulated GPUs: open {url}\n"
        f"  log in as {' or '.join(USERS)} (users) or {ADMIN_USER} (the scheduler's admin), "
        f"password {args.password!r}\n"
        f"  the scheduler: {url}services/{scopes.SERVICE_NAME}/ (the Services menu)\n"
        f"  state in {state}{' (removed at the end)' if temporary else ''}; Ctrl-C stops it",
        flush=True,
    )
    hub = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=state)

    def stop(signum: int, frame: Any) -> None:
        hub.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    try:
        code = hub.wait()
    except KeyboardInterrupt:  # the Hub got the same Ctrl-C: let it stop its servers
        code = hub.wait()
    finally:
        if temporary:
            shutil.rmtree(state, ignore_errors=True)
    return code
