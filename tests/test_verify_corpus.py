"""Acceptance over the template corpus through a real llama.cpp: each template of tests/data/templates alone
in a stand-in GGUF (byte-level vocabulary plus the template's control markers as CONTROL tokens).

For every template: llama.cpp's capability probe (``supports_tools``), the canary in llama.cpp's prompt
(stage 2), the expected verdict (template_expectations.json) and gguftpl's own analysis must agree; a call
llama.cpp parses must classify as the expected dialect; and the templates where llama.cpp and transformers
render differently, or where llama.cpp does not parse the template's own call, are exactly the ones the
data files list (with the reason).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gguftpl.analysis import analyze_template_text
from gguftpl.engines.llamacpp_session import LlamaCppSession
from gguftpl.templates.dialect import classify
from gguftpl.verify.result import (
    FAIL,
    PASS,
    STAGE_AGREEMENT,
    STAGE_CALL,
    STAGE_RESULT,
    STAGE_SCHEMA,
    STAGE_SELECTION,
    VerifyResult,
)
from gguftpl.verify.stages import verify_session

pytest.importorskip("xllamacpp")

DATA = Path(__file__).resolve().parent / "data"
TEMPLATES = DATA / "templates"
EXPECT = json.loads((DATA / "template_expectations.json").read_text(encoding="utf-8"))["templates"]
DIFFS = json.loads((DATA / "engine_differences.json").read_text(encoding="utf-8"))["templates"]
CORPUS = json.loads((DATA / "llamacpp_corpus.json").read_text(encoding="utf-8"))
NAMES = sorted(p.name for p in TEMPLATES.glob("*.jinja"))


def test_data_files_name_only_corpus_templates() -> None:
    assert set(EXPECT) == set(NAMES)
    for listed in (DIFFS, CORPUS["tools_verdict_disagreements"], CORPUS["call_not_parsed"]):
        assert set(listed) <= set(NAMES)


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    """One llama.cpp server per template, all in this process; analysed once."""
    out: dict[str, Any] = {}
    for name in NAMES:
        text = (TEMPLATES / name).read_text(encoding="utf-8")
        with LlamaCppSession(templates={"default": text}) as s:
            r = verify_session(s, name)
        out[name] = (r, analyze_template_text(text, name="default"))
    return out


def _stage(r: VerifyResult, name: str) -> Any:
    return r.stage(name)


@pytest.mark.parametrize("name", NAMES)
def test_tools_verdict_agrees(results: dict[str, Any], name: str) -> None:
    r, report = results[name]
    caps = _stage(r, STAGE_SELECTION).data["caps"]
    verdicts = {
        "llama.cpp supports_tools": caps.get("supports_tools"),
        "canary in llama.cpp's prompt": _stage(r, STAGE_SCHEMA).status == PASS,
        "template_expectations tools_in_prompt": EXPECT[name]["tools_in_prompt"],
        "gguftpl analysis tools_in_prompt": report.tools_in_prompt,
    }
    if name in CORPUS["tools_verdict_disagreements"]:
        assert len(set(verdicts.values())) > 1, f"{name} is listed as a disagreement but all verdicts agree"
    else:
        assert len(set(verdicts.values())) == 1, f"{name}: {verdicts}"


@pytest.mark.parametrize("name", NAMES)
def test_call_parse_matches_dialect_or_is_listed(results: dict[str, Any], name: str) -> None:
    r, _ = results[name]
    st = _stage(r, STAGE_CALL)
    exp = EXPECT[name]
    if not exp["renders_tool_calls"]:
        # no call in history means no format for llama.cpp to learn: stage 3 cannot pass
        assert st.status == FAIL
        assert name not in CORPUS["call_not_parsed"]
    elif name in CORPUS["call_not_parsed"]:
        assert st.status == FAIL, f"{name} now parses: remove it from llamacpp_corpus.json"
        outcome = CORPUS["call_not_parsed"][name]["outcome"]
        marker = {"rejected": "parser rejected", "content": "came back as content", "no-call-text": "writes no text"}
        assert marker[outcome] in st.evidence
    else:
        assert st.status == PASS, st.evidence
        assert classify(st.data["call_text"])[0] == exp["dialect"]


@pytest.mark.parametrize("name", NAMES)
def test_engine_agreement_or_listed_difference(results: dict[str, Any], name: str) -> None:
    r, _ = results[name]
    st = _stage(r, STAGE_AGREEMENT)
    if name in DIFFS:
        d = DIFFS[name]
        assert st.status == FAIL, f"{name} now agrees: remove it from engine_differences.json"
        assert st.evidence.startswith(d["request"] + ":")
        assert d["detail"] in st.evidence
        kind = "transformers (HF semantics) cannot" if d["kind"] == "hf-error" else "the prompts differ"
        assert kind in st.evidence
    else:
        assert st.status == PASS, st.evidence


def test_result_rendered_wherever_the_template_renders_tool_messages(results: dict[str, Any]) -> None:
    """Stage 4 through llama.cpp agrees with the expectation that a template renders tool results, except
    where llama.cpp cannot render a tools request at all (named in the evidence)."""
    for name in NAMES:
        r, report = results[name]
        st = _stage(r, STAGE_RESULT)
        if report.renders_tool_results:
            assert st.status == PASS or "cannot render" in st.evidence, (name, st.evidence)
