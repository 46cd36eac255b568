"""The idle-reclaim rule of interactive leases (core/idle.py)."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.core.idle import IdleAction, IdleRule, idle_verdict

RULE = IdleRule(timeout_s=3600, contended_timeout_s=900, warning_s=300)


def test_a_busy_or_unknown_kernel_keeps_its_lease():
    assert idle_verdict(RULE, None, False, 8).action == IdleAction.KEEP
    assert idle_verdict(RULE, 10_000, True, 8).action == IdleAction.KEEP  # its GPUs work
    assert idle_verdict(IdleRule(timeout_s=0), 10_000, False, 8).action == IdleAction.KEEP


def test_warned_before_released_at_the_timeout():
    assert idle_verdict(RULE, 3000, False, 0).action == IdleAction.KEEP
    warn = idle_verdict(RULE, 3400, False, 0)
    assert warn.action == IdleAction.WARN and warn.release_in_s == 200
    assert "released in 3 minutes" in warn.reason
    gone = idle_verdict(RULE, 3600, False, 0)
    assert gone.action == IdleAction.RELEASE and "limit 60 minutes" in gone.reason


def test_waiting_jobs_shorten_the_time_and_say_so():
    released = idle_verdict(RULE, 900, False, 2)
    assert released.action == IdleAction.RELEASE
    assert "while jobs wait for 2 GPUs" in released.reason and "limit 15 minutes" in released.reason
    assert idle_verdict(RULE, 900, False, 0).action == IdleAction.KEEP


def test_bad_rules_are_refused():
    with pytest.raises(ValueError):
        IdleRule(timeout_s=-1)
    with pytest.raises(ValueError):
        IdleRule(warning_s=float("nan"))
