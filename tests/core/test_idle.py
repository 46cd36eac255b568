"""The idle-reclaim rule of interactive leases (core/idle.py)."""

from __future__ import annotations

import pytest

from jupyter_elastic_gpu.core.idle import IdleAction, IdleRule, idle_verdict, lease_verdict

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


BOUNDED = IdleRule(timeout_s=3600, contended_timeout_s=900, warning_s=300, hold_limit_s=14400)


def test_a_busy_lease_is_bounded_only_while_others_wait():
    assert lease_verdict(BOUNDED, 0, True, 0, held_s=10**6).action == IdleAction.KEEP
    warn = lease_verdict(BOUNDED, 0, True, 2, held_s=14400 - 120)
    assert warn.action == IdleAction.WARN and warn.release_in_s == 120
    assert "while jobs wait for 2 GPUs (limit 240 minutes)" in warn.reason
    gone = lease_verdict(BOUNDED, 0, True, 2, held_s=14400)
    assert gone.action == IdleAction.RELEASE and gone.reason.startswith("released: it has held")
    assert lease_verdict(IdleRule(), 0, True, 2, held_s=10**6).action == IdleAction.KEEP


def test_above_its_owners_share_a_lease_is_warned_then_released():
    assert lease_verdict(BOUNDED, 0, True, 2, 60, over_share_s=None, waiting_users=1).action == (
        IdleAction.KEEP
    )
    assert lease_verdict(BOUNDED, 0, True, 2, 60, over_share_s=10, waiting_users=0).action == (
        IdleAction.KEEP
    )  # nobody else waits: above its share is no harm
    warn = lease_verdict(BOUNDED, 0, True, 2, 60, over_share_s=100, waiting_users=1)
    assert warn.action == IdleAction.WARN and warn.release_in_s == 200
    assert "more than their fair share while 1 other user waits" in warn.reason
    gone = lease_verdict(BOUNDED, 0, True, 2, 60, over_share_s=300, waiting_users=2)
    assert gone.action == IdleAction.RELEASE and "2 other users wait:" not in gone.reason


def test_the_release_that_comes_first_is_the_one_said():
    idle = lease_verdict(BOUNDED, 900, False, 2, held_s=60, over_share_s=10, waiting_users=1)
    assert idle.action == IdleAction.RELEASE and "has run nothing" in idle.reason
    soon = lease_verdict(BOUNDED, 0, True, 2, held_s=14400 - 50, over_share_s=10, waiting_users=1)
    assert soon.action == IdleAction.WARN and soon.release_in_s == 50
