"""Verify's call stage on real templates from outside the llama.cpp corpus (tests/data/real_templates, with
provenance): what the evidence says when a template writes no call, and when llama.cpp reads a call as the
model's reasoning."""

from __future__ import annotations

from pathlib import Path

import pytest

from gguftpl.engines.llamacpp_session import LlamaCppSession
from gguftpl.templates import probes
from gguftpl.verify.result import FAIL, STAGE_CALL
from gguftpl.verify.stages import verify_session

pytest.importorskip("xllamacpp")

REAL = Path(__file__).resolve().parent / "data" / "real_templates"


def _call_stage(name: str) -> tuple[str, str]:
    with LlamaCppSession(templates={"default": (REAL / name).read_text(encoding="utf-8")}) as s:
        st = verify_session(s).stage(STAGE_CALL)
    return st.status, st.evidence


def test_a_turn_without_name_or_arguments_is_no_call_text() -> None:
    """vLLM's Mistral example writes `[TOOL_CALLS]` + the (empty) content: that is the turn's scaffolding, not
    a call written without its name (the old evidence said so)."""
    status, evidence = _call_stage("vllm-tool_chat_template_mistral.jinja")
    assert status == FAIL
    assert "writes no text for an assistant tool call" in evidence
    assert "neither the function's name nor its arguments" in evidence and "'[TOOL_CALLS]'" in evidence
    assert "without the function's name" not in evidence


def test_a_call_read_as_reasoning_says_so() -> None:
    """HyperCLOVA X opens a call turn like its reasoning turn; llama.cpp parses the call into reasoning_content
    and the old evidence showed only the leftover content ('<|im_end|>')."""
    status, evidence = _call_stage("vllm-tool_chat_template_hyperclovax_seed_think_14b.jinja")
    assert status == FAIL
    assert "parsed no tool call" in evidence
    assert "took the call as reasoning" in evidence and probes.CANARY_TOOL_NAME in evidence.split("reasoning", 1)[1]
