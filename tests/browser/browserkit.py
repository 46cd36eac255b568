"""Playwright's assertions for the browser tests, imported once: a test module that imports
``expect`` from here is skipped where Playwright is not installed, and fails under CI, which
installs it (the test extras)."""

from __future__ import annotations

import os

import pytest

try:
    from playwright.sync_api import expect
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("playwright is not installed (make test installs it)", allow_module_level=True)

__all__ = ["expect"]
