"""Headless Chromium for the browser tests: the system browser (Debian's `chromium`) driven by
Playwright for Python, never `playwright install` (which downloads a browser). Without either
the tests are skipped with a reason, unless `CI` is set: then they fail."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.e2e.dagster_server import DagsterServer

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


#: Waits of the UI, in milliseconds: Playwright's actions and its `expect` assertions alike
#: (`expect` keeps its own default of 5 s, which a loaded CI machine outlasts while the
#: webserver answers a page's queries).
UI_TIMEOUT_MS = 30_000
SHOULD_SHOW_NUX_QUERY = "query E2EShouldShowNux { shouldShowNux }"


class Evidence:
    """Screenshots of the steps and of a failure, in the artifacts folder."""

    def __init__(self, page: Any, folder: Path, *, show_nux: bool = False) -> None:
        self.page = page
        self.folder = folder
        self.show_nux = show_nux

    def goto(self, url: str) -> None:
        """Open `url`; on a fresh instance, dismiss the dialog greeting the first visitor."""
        from playwright.sync_api import expect

        self.page.goto(url)
        if self.show_nux:  # it shows after a second
            nux = self.page.get_by_role("dialog").filter(has_text="Join the Dagster community")
            nux.get_by_role("button", name="Skip").click()
            expect(nux).to_be_hidden()
            self.show_nux = False

    def screenshot(self, name: str) -> Path:
        path = self.folder / f"{name}.png"
        # Finish transitions (dialogs fade in) rather than catch them half-way.
        self.page.screenshot(path=str(path), animations="disabled")
        return path

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.screenshot(f"failure-{name}")
            raise


@contextlib.contextmanager
def browser_page(
    sync_playwright: Any, server: DagsterServer, artifacts: Path, trace: str
) -> Iterator[tuple[Any, Evidence]]:
    """A page of headless Chromium on the server, the first-visit dialog dismissed when it
    shows; a failure leaves a screenshot and the Playwright trace `trace`."""
    from playwright.sync_api import expect

    expect.set_options(timeout=UI_TIMEOUT_MS)
    show_nux = server.graphql(SHOULD_SHOW_NUX_QUERY)["shouldShowNux"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1600, "height": 1100})
        context.set_default_timeout(UI_TIMEOUT_MS)
        context.tracing.start(screenshots=True, snapshots=True)
        page = context.new_page()
        evidence = Evidence(page, artifacts, show_nux=show_nux)
        passed = False
        try:
            yield page, evidence
            passed = True
        finally:
            if passed:
                context.tracing.stop()
            else:
                with contextlib.suppress(Exception):
                    evidence.screenshot("failure")
                with contextlib.suppress(Exception):
                    context.tracing.stop(path=str(artifacts / trace))
            context.close()
            browser.close()
