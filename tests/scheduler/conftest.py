"""What several scheduler tests share: a shared scheduler with two users and an admin."""

from __future__ import annotations

import pytest
from servers import DaemonProcess, free_port


@pytest.fixture
def daemon(tmp_path):
    """A running `jupyter elastic-gpu scheduler` and its tokens: alice, bob, and ops (admin)."""
    d = DaemonProcess(tmp_path, free_port())
    d.state.mkdir(parents=True)
    tokens = {user: d.add_user(user, admin=user == "ops") for user in ("alice", "bob", "ops")}
    d.start()
    yield d, tokens
    d.stop()


@pytest.fixture
def user_server(daemon, server_process):
    """Starts a user's own Jupyter server, a client of ``daemon`` with that user's token."""
    d, tokens = daemon

    def start(user: str):
        return server_process(
            port=free_port(),
            name=user,
            token=f"{user}-jupyter-token",
            config={"scheduler_url": d.api_url, "scheduler_token": tokens[user]},
        )

    return start
