"""Fixtures shared by the browser tests."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.e2e.browser import ARTIFACTS


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """This test's own, emptied folder under `test-artifacts/e2e/`."""
    folder = ARTIFACTS / re.sub(r"[^\w.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
