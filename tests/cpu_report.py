"""``--cpu-report N``: the tests and test files that used the most CPU seconds.

The full run is bound by its 2 cores, not by waiting: wall-clock durations (``--durations``) of
tests that share a machine tell little about what to make cheaper. A test's CPU here is its
worker's plus that of every process the worker waited for (servers, sidecars and, through them,
trainers), from its setup to its teardown. A module's servers count to the test whose teardown
stops them; a process killed but never waited for is reaped by ``subprocess`` at a later
``Popen`` and counts to that test.
"""

from __future__ import annotations

import resource
from collections import Counter

import pytest

_CPU_START = pytest.StashKey[float]()

#: nodeid -> CPU seconds, gathered where the reports arrive (the controller under xdist).
_used: dict[str, float] = {}


def _cpu_s() -> float:
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser):
    parser.addoption(
        "--cpu-report",
        type=int,
        default=0,
        metavar="N",
        help="after the run, list the N tests (and test files) that used the most CPU seconds",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_CPU_START] = _cpu_s()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown":
        report.user_properties.append(("cpu_s", _cpu_s() - item.stash[_CPU_START]))
    return report


def pytest_runtest_logreport(report):
    if report.when == "teardown" and (cpu := dict(report.user_properties).get("cpu_s")) is not None:
        _used[report.nodeid] = cpu


def pytest_terminal_summary(terminalreporter, config):
    n = config.getoption("cpu_report")
    if not n or not _used:
        return
    files: Counter[str] = Counter()
    for nodeid, cpu in _used.items():
        files[nodeid.split("::")[0]] += cpu
    terminalreporter.section(
        f"CPU seconds: {sum(_used.values()):.0f} in all; the {n} largest tests and files"
    )
    for name, cpu in [*Counter(_used).most_common(n), ("", None), *files.most_common(n)]:
        terminalreporter.write_line(f"{cpu:8.1f}s  {name}" if cpu is not None else "")
