# A JupyterHub configuration with jupyter-elastic-gpu: one GPU scheduler for every user of the
# Hub, run by the Hub as its service "elastic-gpu" (docs/jupyterhub.md explains each part).
#
#   pip install 'jupyter-elastic-gpu[hub]'   # in the Hub's environment and in users' servers
#   jupyterhub -f jupyterhub_config.py
#
# `jupyter elastic-gpu hub-demo` starts a local Hub with these settings to try them.
c = get_config()  # noqa: F821

# -- The service ------------------------------------------------------------------------------
# The Hub starts it, gives it an API token and an OAuth client, and routes
# /services/elastic-gpu/ to it. Its URL is where it listens; users' servers and sidecars reach
# it there (use an address they can reach when they run on other machines).
ELASTIC_GPU_URL = "http://127.0.0.1:10101"
c.JupyterHub.services = [
    {
        "name": "elastic-gpu",
        "url": ELASTIC_GPU_URL,
        # Options: `jupyter elastic-gpu hub-service --help-all` (state in
        # ~/.local/state/jupyter-elastic-gpu-hub of the Hub's account by default).
        "command": ["jupyter-elastic-gpu", "hub-service"],
        # A link to its page (the admin page) in the Hub's Services menu.
        "display": True,
        # It is part of this Hub: no "allow elastic-gpu to know who you are?" page.
        "oauth_no_confirm": True,
        # What a browser's login to the service may carry, each only where the user holds it.
        "oauth_client_allowed_scopes": [
            "custom:elastic-gpu:submit",
            "custom:elastic-gpu:read-all",
            "custom:elastic-gpu:admin",
        ],
    }
]

# -- Scopes and roles -------------------------------------------------------------------------
c.JupyterHub.custom_scopes = {
    "custom:elastic-gpu:submit": {"description": "Submit GPU jobs and change your own."},
    "custom:elastic-gpu:read-all": {"description": "See every user's GPU jobs in full."},
    "custom:elastic-gpu:admin": {"description": "See and steer every GPU job and GPU."},
}
c.JupyterHub.load_groups = {
    # Members see and steer every job, and reach the admin page.
    "gpu-admins": {"users": ["admin"]},
    # Groups are also what fair share weighs (see "Fair share" below).
    "physics": {"users": []},
}
c.JupyterHub.load_roles = [
    {
        # The role every user has: JupyterHub's own ("self") plus the scheduler. Without
        # custom:elastic-gpu:submit a user can read their jobs and the queue, not submit.
        "name": "user",
        "scopes": ["self", "access:services!service=elastic-gpu", "custom:elastic-gpu:submit"],
    },
    {
        "name": "gpu-admins",
        "groups": ["gpu-admins"],
        "scopes": [
            "access:services!service=elastic-gpu",
            "custom:elastic-gpu:submit",
            "custom:elastic-gpu:read-all",
            "custom:elastic-gpu:admin",
        ],
    },
    {
        # The service's own token: least privilege, no `admin`. It tells the Hub that users
        # with queued or running jobs are active (jupyterhub-idle-culler then spares them).
        "name": "elastic-gpu-service",
        "services": ["elastic-gpu"],
        "scopes": ["users:activity"],
    },
]

# -- Users' servers ---------------------------------------------------------------------------
# Hub mode: each user's server forwards to the service with its own Hub token and starts its
# user's trainers (they run as the user). Only this setting turns hub mode on.
c.Spawner.environment = {"ELASTIC_GPU_HUB_SERVICE_URL": f"{ELASTIC_GPU_URL}/services/elastic-gpu/"}
# The server's token carries the scopes listed here that its user holds: JupyterHub's defaults
# (the `server` role) and the scheduler's.
c.Spawner.server_token_scopes = [
    "users:activity!user",
    "access:servers!server",
    "access:services!service=elastic-gpu",
    "custom:elastic-gpu:submit",
    "custom:elastic-gpu:read-all",
    "custom:elastic-gpu:admin",
]

# -- Fair share -------------------------------------------------------------------------------
# GPUs are shared between users by the weights of their JupyterHub groups (default 1 each; a
# user's weight is the largest of their groups'). Admins set them on the admin page
# (/services/elastic-gpu/), where they are kept; the service's command can set starting
# values, one option per group (c.SchedulerService.group_weights):
c.JupyterHub.services[0]["command"] += ["--SchedulerService.group_weights=physics=2"]
