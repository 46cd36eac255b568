"""Playwright's assertions for the browser tests, imported once: a test module that imports
``expect`` from here is skipped where Playwright is not installed, and fails under CI, which
installs it (the test extras)."""

from __future__ import annotations

from needs import missing

try:
    from playwright.sync_api import TimeoutError, expect
except ImportError:
    missing("playwright is not installed", module_level=True)

__all__ = ["TimeoutError", "expect"]
