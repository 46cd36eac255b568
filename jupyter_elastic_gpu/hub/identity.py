"""Who is asking the hub service: the Hub says, through the caller's token or OAuth cookie.

``HubIdentityProvider`` is JupyterHub's own identity provider for Jupyter servers
(``HubOAuth``: ``Authorization: token`` headers, OAuth cookies set by the callback at
``oauth_callback``, the login redirect, XSRF), with ``access:services!service=elastic-gpu``
as the scope that lets a caller in at all. A job's owner is the Hub user the token belongs
to; what they may do beyond their own jobs comes from the token's scopes (``hub/scopes.py``).
Sidecars are not Hub users: their heartbeats carry the job's secret, which is never sent on
to the Hub.

XSRF is Jupyter Server's own: token-authenticated requests need none, cookie-authenticated
POSTs send the ``_xsrf`` cookie back in ``X-XSRFToken``. ``HubOAuth`` would otherwise replace
Jupyter Server's check with the Hub's, which runs before the caller is known (tornado checks
XSRF before ``prepare``) and so refuses every token-authenticated POST.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jupyterhub.services.auth import HubOAuth
from jupyterhub.singleuser.extension import JupyterHubIdentityProvider
from traitlets import default

from ..scheduler.principal import Principal
from ..server.credentials import without_credentials
from ..server.handlers import HeartbeatHandler
from . import scopes


@dataclass(frozen=True)
class HubPrincipal(Principal):
    """A Hub user; ``submits``: holds ``custom:elastic-gpu:submit`` (may submit and change
    their own jobs; without it they read their jobs and the queue only)."""

    submits: bool = False


def principal_of_hub(model: dict[str, Any]) -> HubPrincipal:
    """The principal behind a Hub user model (``GET /hub/api/user`` with the caller's token:
    its name, groups and the token's scopes)."""
    held = set(model.get("scopes") or ())
    return HubPrincipal(
        str(model["name"]),
        admin=scopes.ADMIN in held,
        reads_all=scopes.READ_ALL in held,
        groups=tuple(sorted(str(g) for g in model.get("groups") or ())),
        submits=scopes.SUBMIT in held,
    )


class ServiceHubOAuth(HubOAuth):
    """The Hub's OAuth for the service, leaving XSRF to Jupyter Server. Where a login
    returns to keeps no credential of the page it started at (``?token=``): the callback
    sends the browser there in its Location header."""

    def _patch_xsrf(self, handler: Any) -> None:
        return None

    def _persist_url_token_if_set(self, handler: Any) -> None:
        # HubAuth would make a ``?token=`` a cookie once the request is authenticated, even by
        # another token in its header; the service takes no token from a page's address
        # (``allow_token_in_url``), and its cookie comes from the OAuth callback only.
        return None

    def generate_state(self, next_url: str | None = None, **extra_state: Any) -> str:
        clean = without_credentials(next_url) if next_url else next_url
        return super().generate_state(clean, **extra_state)


class HubIdentityProvider(JupyterHubIdentityProvider):
    """JupyterHub's identity provider, except for sidecar heartbeats (their own secret)."""

    @default("hub_auth")
    def _default_hub_auth(self) -> HubOAuth:
        return ServiceHubOAuth(parent=self)  # from the environment the Hub starts it with

    def _patch_xsrf(self, handler: Any) -> None:
        return None

    async def get_user(self, handler: Any) -> Any:
        if isinstance(handler, HeartbeatHandler):
            return None  # a job secret is no Hub token: the Hub never sees it
        return await super().get_user(handler)
