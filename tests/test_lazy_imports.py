"""Importing the package and starting `inspect` must not pay for the heavy dependencies."""

from __future__ import annotations

import json
import subprocess
import sys

import gguftpl
from tests.conftest import SAMPLES

HEAVY = ("transformers", "huggingface_hub", "xllamacpp", "mcp", "numpy", "gguf", "jinja2", "deepdiff")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_import_is_light():
    mods = _modules_after("import gguftpl")
    assert not [m for m in HEAVY if m in mods]


def test_inspect_is_light():
    sample = str(SAMPLES / "no-template.gguf")
    code = f"from gguftpl.cli import main\ntry:\n    main(['inspect', {sample!r}])\nexcept SystemExit:\n    pass"
    mods = _modules_after(code)
    assert not [m for m in HEAVY if m in mods]


def test_public_api_resolves():
    for name in gguftpl.__all__:
        assert getattr(gguftpl, name) is not None
