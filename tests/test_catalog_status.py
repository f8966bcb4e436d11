"""Which catalog texts are proven: patch, inspect and diff say it on stdout (not only in a stderr warning)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.upstream.catalog import PROVEN, catalog_dir, load_catalog

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    res = CliRunner().invoke(main_group, list(args), env=env)
    return res.exit_code, res.stdout


@pytest.fixture
def unproven_catalog(tmp_path: Path) -> dict[str, str]:
    """A copy of the bundled catalog whose Hermes-2-Pro-Mistral-7B texts carry the labels they had before they were
    byte-proven (tool_use PROXY, default CORROBORATED): how patch, inspect and diff show an unproven text."""
    copy = tmp_path / "catalog"
    shutil.copytree(catalog_dir(), copy)
    index = json.loads((copy / "index.json").read_text(encoding="utf-8"))
    entry = next(e for e in index["entries"] if e["repo_id"] == HERMES)
    entry["status"] = "PROXY"
    entry["templates"]["tool_use"]["status"] = "PROXY"
    entry["templates"]["default"]["status"] = "CORROBORATED"
    (copy / "index.json").write_text(json.dumps(index), encoding="utf-8")
    return {"GGUFTPL_CATALOG": str(copy)}


def test_the_catalog_names_a_status_per_template() -> None:
    entry = load_catalog().get(HERMES)
    assert entry is not None
    assert {t.status for t in entry.templates.values()} <= set(PROVEN)
    assert entry.templates["tool_use"].status == "EXACT"  # byte-proven (upstream_templates/SOURCES.md)


def test_patch_inspect_and_diff_say_which_texts_are_proven(tmp_path: Path, unproven_catalog: dict[str, str]) -> None:
    out = tmp_path / "fixed.gguf"
    code, text = _run("patch", str(SAMPLE), "--from-catalog", HERMES, "-o", str(out), "--no-audit", "--show-diff")
    assert code == 0, text
    assert "catalog tool_use: EXACT (byte-verified" in text and "not byte-verified" not in text
    code, text = _run("inspect", str(out))
    assert code == 0
    assert "from the bundled catalog: EXACT (byte-verified" in text

    unproven = tmp_path / "unproven.gguf"
    code, text = _run(
        "patch", str(SAMPLE), "--from-catalog", HERMES, "-o", str(unproven), "--no-audit", env=unproven_catalog
    )
    assert code == 0, text
    assert "catalog tool_use: PROXY (not byte-verified" in text
    assert "catalog default: CORROBORATED (not byte-verified" in text

    code, text = _run("inspect", str(unproven))
    assert code == 0
    assert "from the bundled catalog: PROXY (not byte-verified" in text

    code, text = _run("diff", str(SAMPLE), "--catalog", HERMES, "--no-behaviour", env=unproven_catalog)
    assert code == 1  # the sample lost tool_use
    assert "catalog text PROXY (not byte-verified" in text
    header = next(line for line in text.splitlines() if line.strip().startswith("upstream:"))
    assert header.count("bundled catalog") == 1, header


def test_diff_catalog_auto_names_the_catalog_once() -> None:
    code, text = _run("diff", str(SAMPLE), "--catalog", "auto", "--no-behaviour")
    assert code == 1
    header = next(line for line in text.splitlines() if line.strip().startswith("upstream:"))
    assert header.count("bundled catalog") == 1, header
    assert header.endswith("(bundled catalog; matched)"), header
