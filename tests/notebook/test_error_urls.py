"""Errors of the REST client never show a request's query string (internal parameters) nor a
token carried in a URL: they name the scheduler and say what to do."""

from __future__ import annotations

import http.server
import threading

import pytest
from servers import free_port

from jupyter_elastic_gpu.notebook.client import SchedulerClient, SchedulerError


def test_an_unreachable_scheduler_is_named_without_the_query():
    client = SchedulerClient(f"http://127.0.0.1:{free_port()}/lab?token=secret-123", timeout=2)
    with pytest.raises(SchedulerError) as info:
        client.jobs({"state": "running", "since": "1717000000"})
    message = info.value.message
    assert "secret-123" not in message and "state=" not in message and "since=" not in message
    assert "jobs?" not in message
    assert "is JupyterLab" in message


class Failing(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_an_http_error_without_a_message_is_named_without_the_query():
    server = http.server.HTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = SchedulerClient(f"http://127.0.0.1:{server.server_port}/", timeout=5)
        with pytest.raises(SchedulerError) as info:
            client.status({"all": "true", "user": "ann"})
    finally:
        server.shutdown()
        server.server_close()
    message = info.value.message
    assert "HTTP 500" in message
    assert "status?" not in message and "user=ann" not in message and "all=" not in message
