"""When a job's end estimate is trusted (core/eta.py): a settled pace, never its first steps."""

from __future__ import annotations

from jupyter_elastic_gpu.core import eta

TOTAL = 72_000.0  # samples: a 12-minute job at 100 samples/s


def feed(records):
    """The guesses kept from (t, done, samples/s) records, and whether each one was trusted."""
    guesses, told = [], []
    for t, done, rate in records:
        end = eta.predicted_end(t, done, TOTAL, rate)
        if end is not None:
            guesses = eta.remember(guesses, (t, end))
        told.append(eta.trusted(guesses))
    return guesses, told


def test_a_first_slow_step_is_never_told_and_a_settled_pace_is():
    # The first record came after tracing and compiling: 0.11 samples/s, an end 179 h away.
    first = [(0.0, 1.0, 0.11)]
    steady = [(float(t), 100.0 * t, 100.0) for t in range(1, 31)]  # then 100 samples/s
    _, told = feed(first + steady)
    assert not any(told[: 1 + int(eta.SPAN_S)])  # the outlier is in every window of SPAN_S
    assert all(told[-10:])  # once the outlier is out of the window, the steady pace is told


def test_a_burst_of_records_is_not_several_measurements():
    _, told = feed([(0.01 * i, i, 100.0) for i in range(50)])  # 50 records in half a second
    assert not any(told)


def test_a_change_of_pace_is_estimating_again_until_it_settles():
    before = [(float(t), 100.0 * t, 100.0) for t in range(0, 40)]
    after = [(40.0 + t, 4_000 + 400.0 * t, 400.0) for t in range(0, 40)]  # resized to 4 GPUs
    _, told = feed(before + after)
    assert told[39] and not told[41]
    assert told[-1]


def test_no_total_or_no_speed_says_nothing_and_the_memory_is_bounded():
    assert eta.predicted_end(0.0, 10.0, None, 5.0) is None
    assert eta.predicted_end(0.0, 10.0, TOTAL, 0.0) is None
    guesses, _ = feed([(0.1 * t, 10.0 * t, 100.0) for t in range(10_000)])
    assert len(guesses) <= eta.SAMPLES + 2
    again = eta.remember(guesses, guesses[0])  # a record sent again changes nothing
    assert again == guesses


def test_the_tolerance_is_a_share_of_the_job_so_long_jobs_settle_as_short_ones():
    for total_s in (60.0, 36_000.0):  # a minute, ten hours: 10 % noise in the speed
        speed = TOTAL / total_s
        records = [(float(t), speed * t, speed * (1.1 if t % 2 else 0.95)) for t in range(30)]
        _, told = feed(records)
        assert told[-1], total_s
