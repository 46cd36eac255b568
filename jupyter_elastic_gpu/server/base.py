"""What every handler of the API shares, the REST routes and the websocket alike: its app's
backend, the caller, and the one error map a client is told (``errors.py``)."""

from __future__ import annotations

from http.client import responses
from typing import Any

from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..errors import ElasticGPUError
from ..scheduler.principal import Principal
from .credentials import scrub_query


class ElasticHandler(ExtensionHandlerMixin):
    """What every route needs from its app: the backend, and who is asking."""

    @property
    def backend(self) -> Any:
        return self.extensionapp.backend

    async def principal(self) -> Principal:
        return self.extensionapp.principal_of(self.current_user)

    def _request_summary(self) -> str:
        """The request as tornado's warnings name it, without credentials: a refused request
        may carry a real token with a typo, or one meant for another service."""
        return f"{self.request.method} {scrub_query(self.request.uri or '')} ({self.request.remote_ip})"


def error_document(error: BaseException | None, status: int) -> dict[str, Any]:
    """What a client is told of an error, on every route and the websocket: the message that
    says what to do and a machine-readable ``reason`` (``errors.py``). A fault of ours says
    only where to look."""
    if isinstance(error, ElasticGPUError):
        return {"message": error.message, "reason": error.reason}
    if isinstance(error, web.HTTPError):  # tornado's and Jupyter's own refusals
        message = error.log_message % error.args if error.args else error.log_message
        return {"message": message or responses.get(status, "error"), "reason": error.reason}
    return {"message": f"internal error ({status}): see the server's log", "reason": "internal"}
