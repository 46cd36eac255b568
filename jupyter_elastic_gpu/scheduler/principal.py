"""Who is asking: the one notion of identity the service decides on.

Every front door turns its own credentials into a ``Principal``: a Jupyter server its
authenticated user (``server/handlers.py``), the shared scheduler a per-user token
(``server/identity.py``), the JupyterHub service the Hub's user model and scopes (``hub/``).
The service then needs the name, what the caller may do, and the groups fair share weighs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Owned(Protocol):
    user: str


@dataclass(frozen=True)
class Principal:
    """A user name, what they may do beyond their own jobs, and their groups.

    ``admin`` sees and changes everything; ``reads_all`` sees every job in full but changes
    only its own (JupyterHub's ``custom:elastic-gpu:read-all``); ``groups`` are the user's
    JupyterHub groups, whose weights fair share uses (empty outside JupyterHub).
    """

    user: str
    admin: bool = False
    reads_all: bool = False
    groups: tuple[str, ...] = ()

    def may_see(self, job: Owned) -> bool:
        """Whether this caller sees ``job`` in full (owner, reader of all, or admin)."""
        return self.admin or self.reads_all or job.user == self.user

    def may_change(self, job: Owned) -> bool:
        """Whether this caller may cancel or otherwise change ``job`` (owner or admin)."""
        return self.admin or job.user == self.user
