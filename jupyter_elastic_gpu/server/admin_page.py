"""The admin page (``{base_url}elastic-gpu/admin``): every job and GPU, usage against share,
and the admin actions, for the scheduler's admins only.

One HTML document, its style and script inlined from the package's ``static/admin/`` files,
so that it works under every front door without another route to authenticate. The script
is TypeScript (``labextension/src/admin/``) that the JupyterLab extension's build bundles into
``static/admin/admin.js``, git-ignored, so a checkout builds it. It works behind a Jupyter
server (cookie; the script sends Jupyter's XSRF header), the shared scheduler (``?token=``,
which the script sends on as its token) and the JupyterHub service. The page itself holds no
data: its script reads the API (``gpus``, ``jobs``, ``admin/shares``) and calls the admin
routes, so the page and the API never disagree. Whether the caller is an admin is what the
scheduler's ``whoami`` says (on a user's server in shared mode, the shared scheduler's word);
anyone else gets a 403 page that says what is needed. Someone not logged in goes to the
login page and back, and no credential in the page's address (``?token=``) goes with them:
not into the Location header, the login's address or a log.
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib.resources import files
from string import Template
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.utils import url_path_join

from ..errors import ElasticGPUError
from ..scheduler.admin import HOW_TO_BE_ADMIN
from .credentials import without_credentials

#: Where the page lives under the server's base_url.
PAGE_PATH = "elastic-gpu/admin"
#: The package folder of the page's files.
STATIC = ("static", "admin")
#: The page's script, built with the JupyterLab extension (labextension/admin.webpack.config.js).
SCRIPT = "admin.js"
#: What to do when a checkout has not built the script yet.
NOT_BUILT = (
    "its script is built with the JupyterLab extension: `pip install -e .` from a checkout "
    "(Node.js needed), or `jlpm build` in labextension/"
)
#: Query arguments by which a login URL knows where to return already (an OAuth authorize
#: URL, e.g. the Hub's, keeps it with its ``state``).
RETURNS_BY = frozenset({"next", "state"})


def login_redirect(login_url: str, uri: str) -> str:
    """Where a visitor who is not logged in goes: ``login_url``, with ``next`` (``uri``
    without credentials) added to its query unless it knows where to return already."""
    parts = urlsplit(login_url)
    if any(key in RETURNS_BY for key, _ in parse_qsl(parts.query, keep_blank_values=True)):
        return login_url
    query = "&".join(q for q in (parts.query, urlencode({"next": without_credentials(uri)})) if q)
    return urlunsplit(parts._replace(query=query))


@cache
def asset(name: str) -> str:
    """One of the page's files, as the installed package ships it."""
    return (files(__package__).joinpath(*STATIC) / name).read_text(encoding="utf-8")


def admin_document(config: dict[str, Any]) -> str | None:
    """The page, ``config`` in its body for the script; None while the script is not built."""
    try:
        script = asset(SCRIPT)
    except FileNotFoundError:
        return None
    return Template(asset("admin.html")).substitute(
        style=asset("admin.css"), script=script, config=html.escape(json.dumps(config))
    )


def message_page(title: str, message: str) -> str:
    """A small page that says why the admin page is not shown, and what to do."""
    return Template(asset("message.html")).substitute(
        title=html.escape(title), message=html.escape(message), style=asset("admin.css")
    )


class AdminPageHandler(ExtensionHandlerMixin, JupyterHandler):
    """The page for admins; pages that say why for everyone else (401, 403, 404 where the
    page is not built, the scheduler's own status where it cannot answer)."""

    def initialize(self, name: str, api_prefix: str, *args: Any, **kwargs: Any) -> None:
        self.api_prefix = api_prefix
        super().initialize(name, *args, **kwargs)

    async def get(self) -> None:
        if self.current_user is None:
            if self.login_available:  # a Jupyter server with a login page: go there first
                self.redirect(login_redirect(self.get_login_url(), self.request.uri))
                return
            self._refuse(
                401,
                "Log in first",
                f"{self.extensionapp.how_to_authenticate}; in a browser, open this page with "
                "?token=YOUR_TOKEN",
            )
            return
        app = self.extensionapp
        try:
            who = app.principal_of(self.current_user)
            me = await app.backend.whoami(who)
        except ElasticGPUError as e:
            self._refuse(e.status, "The scheduler cannot answer", e.message)
            return
        if not me.admin:
            self._refuse(
                403,
                "Admins only",
                f"The elastic-gpu admin page is for the scheduler's admins, and {me.user} is "
                f"not one: {HOW_TO_BE_ADMIN}. Your own jobs are in JupyterLab's GPU panel.",
            )
            return
        api = url_path_join(self.base_url, self.api_prefix) + "/"
        page = admin_document(
            {"api": api, "user": me.user, "mode": me.mode, "xsrf": self.xsrf_token.decode()}
        )
        if page is None:
            # Not a fault of the server: this install has no page to show (a 404, never a 5xx).
            self._refuse(
                404, "The admin page is not built", f"The admin page is missing: {NOT_BUILT}."
            )
            return
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(page)

    def _refuse(self, status: int, title: str, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(message_page(title, message))


def handlers(api_prefix: str) -> list[tuple[str, Any]]:
    """The page's route (``base_url`` goes in front), its API under ``api_prefix``."""
    return [(url_path_join("/", PAGE_PATH) + "/?", AdminPageHandler, {"api_prefix": api_prefix})]
