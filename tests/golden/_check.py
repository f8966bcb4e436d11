"""Golden-output comparison for report formats.

Regenerate every golden file after an intended output change with:

    GGUFTPL_UPDATE_GOLDEN=1 /work/venv/bin/pytest tests/test_report.py tests/test_audit_cli.py

then review the diff (``git diff tests/golden``) before committing. Volatile parts (the tool version,
timings, temporary paths) are replaced by placeholders before comparing, by ``normalise``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent
UPDATE_ENV = "GGUFTPL_UPDATE_GOLDEN"


def normalise(text: str, *, paths: dict[str, str] | None = None, version: str | None = None) -> str:
    """Replace each ``paths`` key by its value (longest first), the version string by ``<VERSION>`` and
    every ``"seconds": <number>`` by ``"seconds": 0``."""
    for old, new in sorted((paths or {}).items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    if version:
        text = text.replace(f'"version": "{version}"', '"version": "<VERSION>"')
    return re.sub(r'"seconds": [0-9.e+-]+', '"seconds": 0', text)


def assert_golden(name: str, actual: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get(UPDATE_ENV) == "1":
        path.write_text(actual, encoding="utf-8", newline="")
        return
    assert path.exists(), f"missing golden {path}; run with {UPDATE_ENV}=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"output differs from {path} (set {UPDATE_ENV}=1 to accept the new output)"
