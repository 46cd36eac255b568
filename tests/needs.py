"""What a test needs from the machine, and what happens without it.

On a developer's machine a missing part (a browser, the Hub's proxy, Node.js, an optional
package) skips the tests that need it, saying what installs it. Under ``CI=true`` it fails
them instead: CI installs everything (``.ci/install-test-deps`` and the test extras), so a
missing part there is a broken set-up, and a green run must never mean that the browser, Hub,
Binder or security tests silently did not run.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

#: The environment variable CI sets; ``true`` makes a missing part a failure.
CI_ENV = "CI"


def strict() -> bool:
    """Whether a missing part fails the test (in CI) rather than skipping it."""
    return os.environ.get(CI_ENV, "").lower() in ("true", "1", "yes")


def missing(what: str, how: str = "make test installs it", module_level: bool = False) -> NoReturn:
    """Skip (or, in CI, fail) because ``what`` is not there; ``how`` says what provides it."""
    message = f"{what} ({how})"
    if strict():
        pytest.fail(f"{message}: CI must have it, so this is a broken set-up", pytrace=False)
    pytest.skip(message, allow_module_level=module_level)


def module(name: str, how: str = "make test installs it") -> ModuleType:
    """``importlib.import_module(name)``, or :func:`missing` at module level."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(f"{name} cannot be imported: {e}", how, module_level=True)
