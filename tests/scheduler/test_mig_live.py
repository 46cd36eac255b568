"""A real Jupyter server on a simulated box with an H100 in MIG mode and two T4s: the H100 is
listed with its instances and no job gets it whole; a job larger than the GPUs usable whole is
refused with why."""

from __future__ import annotations

import json

import pytest
from apikit import api, until
from apikit import synthetic_job as synthetic
from tornado.httpclient import HTTPClientError

pytestmark = pytest.mark.slow


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["ElasticGPUApp"]["simulated_gpus"] = "H100-80GB[3g.40gb,2x2g.20gb],2xT4"
    return jp_server_config


async def test_a_gpu_in_mig_mode_is_listed_and_no_job_gets_it_whole(jp_fetch):
    gpus = (await api(jp_fetch, "gpus"))["gpus"]
    assert [(g["id"], g["kind"]) for g in gpus] == [("0", "H100-80GB"), ("1", "T4"), ("2", "T4")]
    assert [s["profile"] for s in gpus[0]["mig"]] == ["3g.40gb", "2g.20gb", "2g.20gb"]

    with pytest.raises(HTTPClientError) as refused:
        await api(jp_fetch, "jobs", "POST", synthetic("wide", 3, 3))
    said = json.loads(refused.value.response.body)["message"]
    assert "min_gpus (3) is more than the 2 GPUs of this server not in MIG mode (1 more are" in said

    job = await api(jp_fetch, "jobs", "POST", synthetic("A", 1, 3))
    assert job["max_gpus"] == 2

    async def running():
        j = await api(jp_fetch, f"jobs/{job['id']}")
        assert j["state"] not in ("failed", "cancelled", "done"), j["reason"]
        return j if j["state"] == "running" and len(j["gpus"]) == 2 else None

    ran = await until(running, 120, "A running on the two T4s")
    assert sorted(ran["gpus"]) == ["1", "2"]
    await api(jp_fetch, f"jobs/{job['id']}/cancel", "POST", {})
