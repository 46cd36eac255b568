"""Who is asking: the one notion of identity the service decides on.

Every front door turns its own credentials into a ``Principal``: a Jupyter server its
authenticated user (``server/handlers.py``), the shared scheduler a per-user token
(``server/identity.py``). The service then needs only the name and whether it is an admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Owned(Protocol):
    user: str


@dataclass(frozen=True)
class Principal:
    """A user name, and whether they may see and change everything."""

    user: str
    admin: bool = False

    def may_see(self, job: Owned) -> bool:
        """Whether this caller sees ``job`` in full and may change it (owner or admin)."""
        return self.admin or job.user == self.user
