"""Layers import only downward: the engines know nothing of templates, runtimes or verification, and the facts
layer (templates/) nothing of verify/, runtimes/, rules/ or the commands. Every import counts, the lazy ones
inside functions too (read from the AST, nothing imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "gguftpl"

BASE = {"errors", "limits", "worker", "safeio", "interrupts", "remotebounds", "hubenv", "__init__"}
ALLOWED = {
    "gguf": BASE | {"gguf"},
    "engines": BASE | {"gguf", "engines"},
    "templates": BASE | {"gguf", "engines", "templates", "findings"},
    "stores": BASE | {"stores", "templates", "gguf"},  # gguf: a split set is one model (gguf.shards names its parts)
}
"""Package -> the top-level gguftpl modules and packages its modules may import."""


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "gguftpl" else [f"gguftpl.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, name) for line, name in out if name.startswith("gguftpl.")]


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_downward(package: str) -> None:
    upward = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, name in _imports(path):
            top = name.split(".")[1]
            if top not in ALLOWED[package]:
                upward.append(f"{path.relative_to(ROOT.parent)}:{line} imports {name}")
    assert not upward, "\n".join(upward)
