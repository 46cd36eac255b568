"""The words of every kind of reason, from its kind and figures: the shared fixtures
(tests/fixtures/reasons.json) that the lab extension's formatter is tested against too, so the
two sides say the same thing; and the figures are what the API's model accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_elastic_gpu.core.reason_kinds import ReasonKind
from jupyter_elastic_gpu.core.reason_text import after_state, gpu_range, named, parts, say
from jupyter_elastic_gpu.models import ReasonFigures

CASES = json.loads((Path(__file__).parents[1] / "fixtures" / "reasons.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[f"{c['kind']}-{i}" for i, c in enumerate(CASES)])
def test_each_reason_reads_as_the_fixture_says(case):
    assert say(case["kind"], case["figures"]) == case["text"]
    ReasonFigures.model_validate(case["figures"])  # every figure is one the API may send


def test_every_kind_has_a_fixture():
    assert {c["kind"] for c in CASES} == set(ReasonKind.values())


def test_a_reason_beside_its_state_leaves_the_state_out():
    waiting = {"needs": 2, "free": 0}
    assert after_state("queued", "waiting", waiting) == "needs 2 GPUs, 0 free"
    assert after_state("running", "kept", {"gpus": 2}) == (
        "on 2 GPUs: kept as is because its resize is in progress"
    )
    assert after_state("done", "done", {}) == ""
    # A suspended job is queued: its reason does not open with its state, and stays whole.
    assert after_state("queued", "waiting", {**waiting, "suspended": True}).startswith("suspended")
    assert parts("crowded", {"gpus": 1, "top": 2}).detail == "the others help other jobs more"


def test_names_go_where_the_reader_may_see_them():
    figures = {"holders": [{"id": "j-1", "ahead": "shorter"}, {"id": "j-2", "ahead": "shorter"}]}
    shown = named(figures, {"j-1": "resnet"}.get)
    assert say("waiting", {"needs": 1, "free": 0, **shown}).endswith(
        "GPUs held by 'resnet' and j-2 (shorter)"
    )
    assert figures["holders"][0] == {"id": "j-1", "ahead": "shorter"}  # not changed in place


def test_a_gpu_range_is_written_one_way():
    assert (gpu_range(1, 4), gpu_range(2, 2), gpu_range(1, 1)) == ("1–4 GPUs", "2 GPUs", "1 GPU")
