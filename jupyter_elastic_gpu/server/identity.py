"""Who is asking, in each deployment: Jupyter identities turned into the service's ``Principal``.

* A personal Jupyter server has one user, the account it runs as; its token proves it.
* A single-user server under JupyterHub knows its hub user (name, admin).
* The shared scheduler (``jupyter elastic-gpu scheduler``) authenticates each user by a
  per-user token from a file it owns (``TokenFileIdentityProvider``), through Jupyter's own
  identity-provider interface, so its routes are the very same handlers.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_server.auth.identity import IdentityProvider, User
from traitlets import Unicode, default

from ..scheduler.principal import Principal

#: The token file's name in the shared scheduler's state dir.
TOKENS_FILE = "tokens.json"


@dataclass
class ElasticUser(User):
    """A user of the shared scheduler: the token file says whether they are an admin."""

    admin: bool = False


def principal_of(user: Any, owner: str, admin_users: Iterable[str]) -> Principal:
    """The principal behind Jupyter's authenticated ``user``."""
    admins = set(admin_users)
    hub_user = getattr(user, "hub_user", None)
    if isinstance(hub_user, dict) and hub_user.get("name"):
        name = str(hub_user["name"])
        return Principal(name, bool(hub_user.get("admin")) or name in admins)
    if isinstance(user, ElasticUser):
        return Principal(user.username, user.admin or user.username in admins)
    return Principal(owner, owner in admins)


class TokenFile:
    """token -> {"user", "admin"}; re-read when the file changes, so add-user needs no restart."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._mtime = -1.0
        self._tokens: dict[str, dict[str, Any]] = {}

    def lookup(self, token: str) -> ElasticUser | None:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        if mtime != self._mtime:
            self._tokens = json.loads(self.path.read_text() or "{}")
            self._mtime = mtime
        entry = self._tokens.get(token) if token else None
        if not isinstance(entry, dict) or not entry.get("user"):
            return None
        name = str(entry["user"])
        return ElasticUser(username=name, name=name, admin=bool(entry.get("admin")))

    def add(self, user: str, admin: bool = False) -> str:
        """A new token for ``user``; the file is rewritten whole and readable by its owner only."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tokens = json.loads(self.path.read_text() or "{}") if self.path.exists() else {}
        token = secrets.token_urlsafe(24)
        tokens[token] = {"user": user, "admin": admin}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(tokens, indent=1))
        os.replace(tmp, self.path)
        return token


class TokenFileIdentityProvider(IdentityProvider):
    """Per-user tokens for the shared scheduler: ``Authorization: token <t>`` (or ``?token=``
    for browser websockets). No login page and no cookies: every request carries its token."""

    tokens_file = Unicode(
        config=True,
        help="JSON file of per-user tokens ({token: {user, admin}}); default: tokens.json in "
        "the scheduler's state dir. `jupyter elastic-gpu scheduler add-user NAME` adds one.",
    )

    @default("need_token")
    def _default_need_token(self) -> bool:
        return False  # no server-wide token: each user has their own

    @property
    def tokens(self) -> TokenFile:
        if getattr(self, "_tokens", None) is None or self._tokens.path != Path(self.tokens_file):
            self._tokens = TokenFile(Path(self.tokens_file))
        return self._tokens

    def get_user(self, handler: Any) -> User | None:
        user = self.tokens.lookup(self.get_token(handler) or "")
        if user is not None:
            handler._token_authenticated = True  # token auth: no XSRF cookie to check
        return user

    @property
    def login_available(self) -> bool:
        return False

    @property
    def logout_available(self) -> bool:
        return False

    def validate_security(self, app: Any, ssl_options: dict | None = None) -> None:
        if app.ip not in ("127.0.0.1", "localhost", "::1") and ssl_options is None:
            app.log.warning(
                "The shared scheduler listens on %s without TLS: tokens cross the network in "
                "clear. Put it behind TLS or keep it on 127.0.0.1.",
                app.ip or "every interface",
            )
