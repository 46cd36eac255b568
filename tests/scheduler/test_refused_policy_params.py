"""A policy parameter of the wrong kind stops the scheduler from starting on it (it would
have been taken as something else: "yes" as true), and every route says which and why."""

from __future__ import annotations

import json

import pytest
from apikit import api
from tornado.httpclient import HTTPClientError


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["SchedulerService"] = {"policy_params": {"lookahead": "yes"}}
    return jp_server_config


async def test_a_policy_parameter_of_the_wrong_kind_is_said_by_every_route(jp_fetch):
    for path in ("gpus", "jobs"):
        with pytest.raises(HTTPClientError) as e:
            await api(jp_fetch, path)
        assert e.value.code == 503  # the service is not there, as for any refused setting
        said = json.loads(e.value.response.body)["message"]
        assert "lookahead must be true or false, got 'yes'" in said
