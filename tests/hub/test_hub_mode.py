"""Hub mode is chosen by configuration only; the Hub's user model becomes the principal; the
sample jupyterhub_config.py grants what the service expects. No Hub needed here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from servers import free_port, get_json
from traitlets.config.loader import PyFileConfigLoader

from jupyter_elastic_gpu.hub import scopes
from jupyter_elastic_gpu.hub.identity import principal_of_hub

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jupyterhub_config.py"

#: What Binder (and any single-user server under JupyterHub) puts in a server's environment.
BINDER_ENV = {
    "JUPYTERHUB_API_TOKEN": "binder-token",
    "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api",
    "JUPYTERHUB_BASE_URL": "/",
    "JUPYTERHUB_CLIENT_ID": "jupyterhub-user-binder",
    "JUPYTERHUB_SERVICE_PREFIX": "/user/binder/",
    "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:8888/user/binder/",
    "JUPYTERHUB_USER": "binder",
    "JUPYTERHUB_OAUTH_CALLBACK_URL": "/user/binder/oauth_callback",
}


def test_jupyterhub_variables_alone_keep_the_personal_scheduler(server_process):
    server = server_process(port=free_port(), env=BINDER_ENV)
    who = get_json(server.api_url + "whoami", server.token)
    assert who["mode"] == "embedded"
    assert get_json(server.api_url + "gpus", server.token)["gpus"]


def test_the_principal_comes_from_the_hubs_user_model():
    model = {
        "name": "carol",
        "admin": True,  # a Hub admin is no elastic-gpu admin without the scope
        "groups": ["physics", "ml"],
        "scopes": [scopes.ACCESS, scopes.READ_ALL, "read:users:name!user=carol"],
    }
    who = principal_of_hub(model)
    assert (who.user, who.admin, who.reads_all, who.submits) == ("carol", False, True, False)
    assert who.groups == ("ml", "physics")
    full = principal_of_hub({"name": "dan", "scopes": [scopes.SUBMIT, scopes.ADMIN]})
    assert full.admin and full.submits and full.groups == ()


def _example() -> dict:
    loader = PyFileConfigLoader(EXAMPLE.name, path=str(EXAMPLE.parent))
    return loader.load_config()


def test_the_sample_config_grants_what_the_service_expects():
    c = _example()
    (service,) = [s for s in c.JupyterHub.services if s["name"] == scopes.SERVICE_NAME]
    assert service["display"] is True
    assert "hub-service" in service["command"]
    assert set(service["oauth_client_allowed_scopes"]) == set(scopes.oauth_client_allowed_scopes())
    assert set(c.JupyterHub.custom_scopes) == {scopes.SUBMIT, scopes.READ_ALL, scopes.ADMIN}
    roles = {r["name"]: r for r in c.JupyterHub.load_roles}
    assert {scopes.ACCESS, scopes.SUBMIT} <= set(roles["user"]["scopes"])
    assert "self" in roles["user"]["scopes"]
    (own,) = [r for r in roles.values() if scopes.SERVICE_NAME in r.get("services", ())]
    assert set(own["scopes"]) <= {*scopes.SERVICE_ROLE_SCOPES, "read:users:groups", "read:groups"}
    assert set(c.Spawner.server_token_scopes) >= {scopes.ACCESS, scopes.SUBMIT}
    assert set(c.Spawner.server_token_scopes) >= set(scopes.HUB_SERVER_SCOPES)
    assert scopes.ENV_SERVICE_URL in c.Spawner.environment


def test_hub_demo_says_what_to_install(tmp_path):
    """Without configurable-http-proxy on PATH, hub-demo says how to get it and starts nothing."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    args = [
        "-m",
        "jupyter_elastic_gpu.cli",
        "hub-demo",
        "--password=a-password",
        f"--state-dir={tmp_path}",
    ]
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "npm install -g configurable-http-proxy" in done.stderr
    assert not (tmp_path / "jupyterhub_config.py").exists()


def test_the_service_is_started_by_the_hub(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    args = ["-m", "jupyter_elastic_gpu.cli", "hub-service"]
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "started by JupyterHub" in done.stderr
