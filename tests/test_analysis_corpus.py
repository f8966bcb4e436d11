"""Acceptance: every corpus template (llama.cpp models/templates, copied in tests/data/templates with
provenance) against its expected verdicts in tests/data/template_expectations.json. No per-case code."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from gguftpl.analysis import analyze_template_text, template_findings
from gguftpl.templates.dialect import DIALECTS

DATA = Path(__file__).resolve().parent / "data"
TEMPLATES = DATA / "templates"
EXPECTED = json.loads((DATA / "template_expectations.json").read_text(encoding="utf-8"))["templates"]
FILES = sorted(p.name for p in TEMPLATES.glob("*.jinja"))


def test_every_template_has_an_expectation_and_provenance() -> None:
    assert len(FILES) == 48
    assert sorted(EXPECTED) == FILES
    provenance = (TEMPLATES / "PROVENANCE.md").read_text(encoding="utf-8")
    for name in FILES:
        digest = hashlib.sha256((TEMPLATES / name).read_bytes()).hexdigest()
        assert re.search(rf"\| {re.escape(name)} \| \d+ \| {digest} \|", provenance), name
    for verdict in EXPECTED.values():
        assert verdict["dialect"] in DIALECTS


@pytest.mark.parametrize("name", FILES)
def test_corpus_template_verdicts(name: str) -> None:
    expected = EXPECTED[name]
    report = analyze_template_text((TEMPLATES / name).read_text(encoding="utf-8"), bos_token="<s>", eos_token="</s>")
    assert report.tools_in_prompt == expected["tools_in_prompt"]
    assert report.tools_static == expected["tools_static"]
    assert report.dialect == expected["dialect"]
    assert report.renders_tool_calls == expected["renders_tool_calls"]
    codes = {f.code for f in template_findings(report)}
    # GT201 is raised exactly for the templates whose tool schemas never reach the prompt.
    assert ("GT201" in codes) == (not expected["tools_in_prompt"])
    # every corpus template keeps system messages and assistant replies (GT105 would be a false alarm)
    assert "GT105" not in codes
    if expected["tools_in_prompt"]:
        prompt = report.prompts["tools"]
        assert "gguftpl_canary_lookup" in prompt and "qz7canaryparam" in prompt


def test_corpus_shape_matches_llamacpp_capability_counts() -> None:
    """RESEARCH §4: most llama.cpp templates read tools; DeepSeek-R1-Distill, DeepSeek-V3.1 and gemma-2
    (all in this corpus) do not."""
    without = {n for n, v in EXPECTED.items() if not v["tools_in_prompt"]}
    assert {
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
        "deepseek-ai-DeepSeek-V3.1.jinja",
        "google-gemma-2-2b-it.jinja",
        "HuggingFaceTB-SmolLM3-3B.jinja",
    } <= without
    assert len(without) < len(EXPECTED) // 4
