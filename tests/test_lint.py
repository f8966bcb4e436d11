"""The tree stays lint-clean (ruff) and the library type-checks (mypy), as part of the test command."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _tool(name: str) -> list[str]:
    if (
        shutil.which(name) is None
        and subprocess.run([sys.executable, "-m", name, "--version"], capture_output=True).returncode != 0
    ):
        pytest.skip(f"{name} not installed (dev extra)")
    return [sys.executable, "-m", name]


def test_ruff_check_and_format():
    ruff = _tool("ruff")
    paths = ["gguftpl", "tests", "scripts"]
    check = subprocess.run([*ruff, "check", *paths], cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-3000:]
    fmt = subprocess.run([*ruff, "format", "--check", *paths], cwd=ROOT, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout[-3000:]


def test_mypy_library():
    mypy = _tool("mypy")
    # mypy's own incremental cache in the checkout (.mypy_cache, git-ignored), as a developer's mypy run keeps it:
    # a cold check is 23 s of CPU (13 of them gguftpl's own modules), a warm one 0.7 s with the same verdicts
    cache = ROOT / ".mypy_cache"
    r = subprocess.run([*mypy, "--cache-dir", str(cache), "gguftpl"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:]
