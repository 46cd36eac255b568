"""A user's server under a real JupyterHub (tests/hubkit.py) starts the sidecars of its user's
jobs: neither a sidecar nor its trainer gets any of that server's credentials (its Hub token,
whatever its name), and the sidecar of a job that ended is no defunct child of the server."""

from __future__ import annotations

import contextlib
import os
import re
import signal

from elastic_gpu_sidecar import protocol as P
from hubkit import synthetic
from procfs import Process, children, environ, processes
from servers import call, get_json, wait_for

USER = "bob"
#: A name that looks like a credential's.
CREDENTIAL = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|COOKIE", re.IGNORECASE)


def sidecar_of(job_id: str) -> Process | None:
    """The running sidecar of ``job_id`` (``python -m elastic_gpu_sidecar run --job-id ID``)."""
    for proc in processes():
        pairs = zip(proc.argv, proc.argv[1:])
        if "elastic_gpu_sidecar" in proc.argv and ("--job-id", job_id) in pairs:
            return proc
    return None


def test_a_users_sidecar_and_trainer_get_none_of_the_servers_credentials(hub):
    if not (hub.server(USER) or {}).get("ready"):
        hub.start_server(USER)
    token, api = hub.token(USER), hub.user_api(USER)
    code, job = call("POST", api + "jobs", token, synthetic("env", 1e9))
    assert code == 201, job
    cancel = f"{api}jobs/{job['id']}/cancel"
    sidecar = None
    try:
        found = wait_for(lambda: sidecar_of(job["id"]), 90, what="bob's sidecar")
        sidecar, server = found.pid, found.ppid

        def trainer() -> int | None:
            found = [
                c for c in children(sidecar) if "elastic_gpu_sidecar.trainer.synthetic" in c.argv
            ]
            return found[0].pid if found else None

        trainer_pid = wait_for(trainer, 60, what="its trainer")
        theirs = environ(server)
        assert {"JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN"} <= set(theirs), "not a Hub's server"
        # Values this short would be found by chance, and are no secret.
        secrets = {k: v for k, v in theirs.items() if CREDENTIAL.search(k) and len(v) >= 8}
        for who, pid in (("sidecar", sidecar), ("trainer", trainer_pid)):
            env = environ(pid)
            raw = "\0".join(f"{k}={v}" for k, v in env.items())
            leaked = [k for k, v in secrets.items() if v in raw]
            assert not leaked, f"the {who} has the value of the server's {leaked}"
            assert not [k for k in env if k.startswith(("JPY_", "JUPYTERHUB_"))], (who, env)
            assert env["PATH"] == theirs["PATH"] and env["HOME"] == theirs["HOME"], who
        assert P.ENV_SECRET in environ(sidecar) and P.ENV_SECRET not in environ(trainer_pid)

        assert call("POST", cancel, token, {})[0] == 202
        wait_for(
            lambda: get_json(f"{api}jobs/{job['id']}", token)["state"] == "cancelled",
            60,
            what="the job to be cancelled",
        )

        def left() -> list:
            return [c for c in children(server) if c.defunct or c.pid == sidecar]

        try:
            wait_for(lambda: not left(), 30, what="the sidecar to end and be waited for")
        except TimeoutError:
            raise AssertionError(f"left in bob's server by a cancelled job: {left()}") from None
    finally:
        call("POST", cancel, token, {})  # not to be started again once its sidecar is gone
        if sidecar is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(sidecar, signal.SIGKILL)  # its trainer dies with it
