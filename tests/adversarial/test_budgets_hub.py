"""The Hub service's budgets, against a real Hub (``hubkit``): the scheduler run as a service
takes only what it uses, as the shared scheduler does (``test_budgets.py``)."""

from __future__ import annotations

import json

from hubkit import synthetic
from servers import call


def test_the_hub_service_takes_no_large_bodies_and_no_passed_variables(hub):
    token = hub.token("alice")
    url = hub.service_api() + "jobs"
    big = {**synthetic("big", 100), "inputs": {"x_train": "A" * (12 * 2**20)}}
    code, doc = call("POST", url, token, big)
    assert code == 413, doc
    assert "8 MB this route takes" in doc["message"] and "passed variables" in doc["message"]
    small = {**synthetic("small", 100), "inputs": {"x": "gASVBAAAAAAAAABLAS4="}}
    code, doc = call("POST", url, token, small)
    assert code == 400 and "takes no passed variables" in doc["message"], doc
    code, doc = call("GET", hub.service_api() + "jobs", token)
    assert code == 200 and not any(j.get("name") in ("big", "small") for j in doc["jobs"])
    assert json.dumps(doc).count("x_train") == 0
