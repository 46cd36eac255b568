"""TensorFlow's start-up notices, kept out of what a user reads (a notebook, a job's log).

``TF_CPP_MIN_LOG_LEVEL=2`` hides TensorFlow's INFO and WARNING lines, but only once its logging
is set up: what its libraries log while they load comes first ("WARNING: All log messages before
absl::InitializeLog() is called are written to STDERR", then the oneDNN notice, whatever the
level). C++ writes those to file descriptor 2, below Python's ``sys.stderr``, so no Python
setting reaches them. Hence: while TensorFlow loads, descriptor 2 points at a temporary file;
afterwards every line but the known notices goes back to it, so errors and anything unknown
stay visible. Whoever sets ``TF_CPP_MIN_LOG_LEVEL`` to 0 or 1 gets everything, as TensorFlow
prints it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
#: Hide TensorFlow's INFO and WARNING lines; keep its errors.
QUIET_LEVEL = "2"

_NOTICES = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    # absl's INFO and WARNING lines: I0000 00:00:1700000000.123456   4242 port.cc:153] ...
    r"|[IW]\d{4} [\d:.]+\s+\d+ \S+:\d+\] "
    # TensorFlow's own format: 2025-01-01 12:00:00.123456: I tensorflow/.../x.cc:32] ...
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IW] \S+:\d+\] "
    # the CUDA build registers its plugins twice and says so at error level, harmlessly
    r"|.*Unable to register cu\w+ factory: Attempting to register factory for plugin cu\w+ "
    r"when one has already been registered"
)


def is_notice(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's start-up notices (not an error)."""
    return _NOTICES.match(line) is not None


def without_notices(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not is_notice(line))


@contextlib.contextmanager
def startup_notices_hidden() -> Iterator[None]:
    """Around the first ``import tensorflow`` (or ``keras``) of a process: its start-up notices
    are dropped, everything else it writes to descriptor 2 comes out when the block ends."""
    os.environ.setdefault(LOG_LEVEL_ENV, QUIET_LEVEL)
    asked = os.environ[LOG_LEVEL_ENV].strip()
    if "tensorflow" in sys.modules or asked in ("0", "1"):
        yield  # loaded already (nothing left to hide), or the user asked for its notices
        return
    with contextlib.ExitStack() as stack:
        try:
            capture = stack.enter_context(tempfile.TemporaryFile())
        except OSError:  # nowhere to hold it: TensorFlow prints as it would
            capture = None
        if capture is None:
            yield
            return
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = without_notices(capture.read().decode(errors="replace")).encode()
            while kept:
                kept = kept[os.write(2, kept) :]
