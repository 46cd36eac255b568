"""The service's name and the JupyterHub scopes that authorise its callers, spelled once.

The Hub grants them through roles (``examples/jupyterhub_config.py``, ``docs/jupyterhub.md``);
the service reads them from the caller's token (``hub/identity.py``):

* ``access:services!service=elastic-gpu``: reach the service at all (read own jobs, the queue);
* ``custom:elastic-gpu:submit``: submit jobs and change one's own;
* ``custom:elastic-gpu:read-all``: see every job in full;
* ``custom:elastic-gpu:admin``: see and change every job, and the admin page.
"""

from __future__ import annotations

from typing import Any

#: The service's name in ``c.JupyterHub.services``: its URL is ``/services/elastic-gpu/``.
SERVICE_NAME = "elastic-gpu"
ACCESS = f"access:services!service={SERVICE_NAME}"
SUBMIT = f"custom:{SERVICE_NAME}:submit"
READ_ALL = f"custom:{SERVICE_NAME}:read-all"
ADMIN = f"custom:{SERVICE_NAME}:admin"
#: The environment variable that puts a user's server in hub mode (set by the spawner).
ENV_SERVICE_URL = "ELASTIC_GPU_HUB_SERVICE_URL"
#: The scopes of JupyterHub's own ``server`` role, which a server token has by default.
HUB_SERVER_SCOPES = ("users:activity!user", "access:servers!server")
#: What the service's own token may do at the Hub: report activity of users with open jobs.
SERVICE_ROLE_SCOPES = ("users:activity",)


def custom_scopes() -> dict[str, dict[str, Any]]:
    """``c.JupyterHub.custom_scopes``."""
    return {
        SUBMIT: {"description": "Submit GPU jobs to elastic-gpu and change your own."},
        READ_ALL: {"description": "See every user's elastic-gpu jobs in full."},
        ADMIN: {"description": "See and steer every elastic-gpu job and GPU."},
    }


def oauth_client_allowed_scopes() -> list[str]:
    """What a browser's OAuth token for the service may carry (each only if the user has it)."""
    return [SUBMIT, READ_ALL, ADMIN]


def server_token_scopes() -> list[str]:
    """What each user's server token carries on top of its defaults, so that the server
    reaches the service as its user (only the scopes the user holds are granted)."""
    return [*HUB_SERVER_SCOPES, ACCESS, SUBMIT, READ_ALL, ADMIN]
