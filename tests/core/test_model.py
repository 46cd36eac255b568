from __future__ import annotations

import dataclasses

import pytest

from jupyter_elastic_gpu.core.model import Decision, InvalidJob, Job, trusted_job


def test_a_trusted_job_is_the_job_of_the_same_values_and_as_frozen():
    job = Job("a", 1.0, 100.0, 1, 4, 2, 30.0, gpus=("g0",), started=True, last_change=5.0)
    values = [getattr(job, f.name) for f in dataclasses.fields(Job)]
    built = trusted_job(*values)
    assert type(built) is Job and built == job and hash(built) == hash(job)
    assert repr(built) == repr(job)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.work_done = 50.0  # type: ignore[misc]


def test_the_public_constructor_still_checks():
    with pytest.raises(InvalidJob, match="max_gpus"):
        Job("a", 0.0, 100.0, min_gpus=3, max_gpus=2)


def test_a_promise_given_as_a_function_is_worked_out_once_when_first_read():
    calls = []

    def promise() -> float:
        calls.append(1)
        return 42.0

    decision = Decision({"a": ("g0",)}, {}, ("a",), promise)
    assert calls == []  # not worked out until read
    assert decision.holds_until == 42.0 and decision.holds_until == 42.0
    assert calls == [1]
    assert decision == Decision({"a": ("g0",)}, {}, ("a",), 42.0)
    assert "holds_until=42.0" in repr(decision)
    assert Decision({}, {}).holds_until is None
    assert dataclasses.replace(decision, holds_until=None).holds_until is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.holds_until = 1.0  # type: ignore[misc]
