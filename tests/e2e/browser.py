"""Headless Chromium for the browser tests: the system browser (Debian's `chromium`) driven by
Playwright for Python, never `playwright install` (which downloads a browser). Without either
the tests are skipped with a reason, unless `CI` is set: then they fail."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Screenshots, page copies and server logs, a folder per test.
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so the browser tests must run)")
    pytest.skip(reason)


def sync_playwright_or_skip() -> Any:
    """Playwright's `sync_playwright`, once both it and the system Chromium are there."""
    if importlib.util.find_spec("playwright") is None:
        unavailable(
            "Playwright for Python is not installed: pip install 'playwright>=1.40' "
            "(it is in the test extra)"
        )
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        unavailable(
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium (the browser tests use "
            "the system browser and never run `playwright install`)"
        )
    from playwright.sync_api import sync_playwright

    return sync_playwright
