"""A personal server whose elastic-gpu setting is refused keeps running, and every route of
the scheduler says which setting and what to do, rather than running on the defaults."""

from __future__ import annotations

import json

import pytest
from apikit import api
from tornado.httpclient import HTTPClientError


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ElasticGPUApp"]["cluster_backend"] = "nonsense"
    return jp_server_config


async def test_a_refused_setting_is_said_by_every_route_and_nothing_starts(jp_fetch, tmp_path):
    for path in ("gpus", "jobs", "whoami"):
        with pytest.raises(HTTPClientError) as e:
            await api(jp_fetch, path)
        assert e.value.code == 503
        said = json.loads(e.value.response.body)["message"]
        assert "a setting of the elastic-gpu scheduler was refused" in said
        assert "'cluster_backend'" in said and "restart the server" in said
    assert not (tmp_path / "scheduler.sqlite").exists()  # no database opened on defaults
