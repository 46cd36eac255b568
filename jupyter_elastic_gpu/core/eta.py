"""When a job's end estimate is trusted: the one rule every front end's "estimating..." follows.

A job's first progress records say little about its pace: the first steps pay for tracing,
compiling and warming the input pipeline, so a first speed of a few samples a second can put a
twelve-minute job's end a week away. An end is therefore only told once the job's pace has
settled: the ends predicted from its progress (``predicted_end``: the time of a record plus the
work left at the speed it reports) must

* be at least ``SAMPLES`` of them, spanning at least ``SPAN_S`` seconds of the trainer's clock
  (so a burst of records in one second is not "several measurements"), and
* agree: the latest ones lie within ``TOLERANCE`` of each other, as a share of the time from
  the first of them to the end the latest predicts (a share, so that long and short jobs
  settle alike; of the whole span rather than of the time left, so that it does not shrink to
  nothing as the job nears its end).

A resize, a restart or a change of pace makes the predictions disagree again, and the end is
"estimating..." until they agree. The guesses kept are bounded (``remember``): one every
``SPAN_S / (SAMPLES - 1)`` seconds or more, and the newest. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Predicted ends needed before one is trusted.
SAMPLES = 3
#: Seconds of the trainer's clock the predictions must span.
SPAN_S = 10.0
#: How far apart they may lie: a share of the time from the first of them to the latest end.
TOLERANCE = 0.2
#: The shortest gap kept between two of them (a newer one only replaces the newest).
STEP_S = SPAN_S / (SAMPLES - 1)

#: (time of the progress record, the end it predicts), both epoch seconds.
Guess = tuple[float, float]


def predicted_end(t: float, done: float, total: float | None, rate: float | None) -> float | None:
    """The end a progress record at ``t`` predicts: ``done`` of ``total`` samples at ``rate``
    samples/s; None when it cannot say (no total or no speed yet)."""
    if total is None or not rate or rate <= 0:
        return None
    end = t + max(total - done, 0.0) / rate
    return end if math.isfinite(end) else None


def remember(guesses: Sequence[Guess], guess: Guess) -> list[Guess]:
    """``guesses`` with ``guess`` (the newest) added, keeping no more than the rule reads: the
    newest replaces the one before when that came less than ``STEP_S`` after its own
    predecessor, and the oldest go once the rest still span ``SPAN_S`` with ``SAMPLES``."""
    kept = list(guesses)
    if kept and guess[0] <= kept[-1][0]:  # a record seen before (a backlog sent again)
        return kept
    if len(kept) >= 2 and kept[-1][0] - kept[-2][0] < STEP_S:
        kept[-1] = guess
    else:
        kept.append(guess)
    while len(kept) > SAMPLES and kept[-1][0] - kept[1][0] >= SPAN_S:
        kept.pop(0)
    return kept


def trusted(guesses: Sequence[Guess]) -> bool:
    """Whether the end the newest of ``guesses`` predicts may be told (the module's rule)."""
    if len(guesses) < SAMPLES:
        return False
    first_t, latest_end = guesses[0][0], guesses[-1][1]
    if guesses[-1][0] - first_t < SPAN_S:
        return False
    ends = [end for _, end in guesses]
    return max(ends) - min(ends) <= TOLERANCE * max(latest_end - first_t, SPAN_S)
