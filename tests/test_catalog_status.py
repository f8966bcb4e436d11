"""Which catalog texts are proven: patch, inspect and diff say it on stdout (not only in a stderr warning)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.upstream.catalog import PROVEN, load_catalog

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main_group, list(args))
    return res.exit_code, res.stdout


def test_the_catalog_names_a_status_per_template() -> None:
    entry = load_catalog().get(HERMES)
    assert entry is not None
    assert {t.status for t in entry.templates.values()} <= set(PROVEN)
    assert entry.templates["tool_use"].status == "PROXY"  # the known unverified text


def test_patch_inspect_and_diff_say_which_texts_are_proven(tmp_path: Path) -> None:
    out = tmp_path / "fixed.gguf"
    code, text = _run("patch", str(SAMPLE), "--from-catalog", HERMES, "-o", str(out), "--no-audit")
    assert code == 0, text
    assert "catalog tool_use: PROXY (not byte-verified" in text
    assert "catalog default: CORROBORATED (not byte-verified" in text

    code, text = _run("inspect", str(out))
    assert code == 0
    assert "from the bundled catalog: PROXY (not byte-verified" in text

    code, text = _run("diff", str(SAMPLE), "--catalog", HERMES, "--no-behaviour")
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
