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


def _modules_with_all() -> list[str]:
    """Every module of the package whose source assigns ``__all__`` (found by parsing, not by a list)."""
    import ast
    from pathlib import Path

    root = Path(gguftpl.__file__).resolve().parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if hasattr(t, "id")]
        if "__all__" in names:
            parts = path.relative_to(root.parent).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_all_is_unique_and_names_what_exists():
    import importlib

    modules = _modules_with_all()
    assert "gguftpl" in modules and len(modules) >= 10
    for name in modules:
        mod = importlib.import_module(name)
        listed = list(mod.__all__)
        dupes = sorted({n for n in listed if listed.count(n) > 1})
        assert not dupes, f"{name}.__all__ lists {dupes} twice"
        missing = [n for n in listed if not hasattr(mod, n)]
        assert not missing, f"{name}.__all__ names {missing}, which {name} does not have"
