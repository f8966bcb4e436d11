"""General causes of verdicts that disagree with llama.cpp (or with the runtime they judge), each reproduced by
a minimal template. Found by labelling real templates with llama.cpp itself (tests/test_engine_verdicts.py and
a scan of several hundred templates outside the corpus); the real templates they were seen on are named in
each reason. Each test is strict xfail until the fix of its cause lands; the fix turns it into a plain test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gguftpl.analysis import analyze_template_text, template_findings
from gguftpl.findings import Finding
from gguftpl.templates import probes
from gguftpl.templates.facts import TemplateFacts

pytest.importorskip("xllamacpp")

BOS, EOS = "<s>", "</s>"
GEN = "{% if add_generation_prompt %}<assistant>{% endif %}"


def _audit(text: str) -> tuple[TemplateFacts, list[Finding]]:
    facts = analyze_template_text(text, bos_token=BOS, eos_token=EOS, llamacpp=True)
    return facts, template_findings(facts)


def _codes(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings}


# -- cause 1: a template that reads `content` only as a list of parts is probed with string content ----------

PARTS_ONLY = (
    "{% for m in messages %}<{{ m.role }}>{% for part in m.content %}{% if part.type == 'text' %}{{ part.text }}"
    "{% endif %}{% endfor %}</s>{% endfor %}" + GEN
)


def test_a_template_that_reads_content_as_parts_is_probed_with_parts() -> None:
    """Cause 1 (fixed): transformers' probes send string content to a template that reads content only as parts;
    llama.cpp (caps supports_string_content=false) sends parts, so the prompts differ by the user's text and GT604
    fires on plain, tools and round trip (SmolVLM, MiniMax-VL-01, Emu3; GT103/GT204 on MiniMax-M1)"""
    facts, findings = _audit(PARTS_ONLY)
    assert facts.llamacpp is not None and facts.llamacpp.caps.get("supports_string_content") is False
    # transformers given the shape llama.cpp gives the template renders the user's text, as llama.cpp does
    assert probes.CANARY_USER in facts.prompts["plain"]
    assert "GT604" not in _codes(findings)


# -- cause 2: the round-trip verdicts (tool results, tool calls) are transformers' alone -----------------------

UNSENT_KEY_IN_TOOL_TURN = (
    "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}{% for m in messages %}{% if m.role == 'tool' %}"
    "{{ '<tool id=' + m.id + '>' + m.content + '</s>' }}{% else %}<{{ m.role }}>{{ m.content }}</s>{% endif %}"
    "{% endfor %}" + GEN
)


def test_tool_results_verdict_follows_llamacpp_where_transformers_raises() -> None:
    """Cause 2 (fixed): renders_tool_results comes from transformers only; where transformers raises on the round
    trip (a key OpenAI clients do not send, concatenated: UndefinedError) GT204 says the round trip raises although
    llama.cpp renders it with the result (MiniMax-M1-40k/80k, MiniMax-Text-01)"""
    facts, findings = _audit(UNSENT_KEY_IN_TOOL_TURN)
    assert facts.llamacpp is not None
    round_trip = facts.llamacpp.text(probes.ROUND_TRIP)
    assert round_trip is not None and probes.CANARY_RESULT in round_trip
    assert facts.renders_tool_results is True
    assert "GT204" not in _codes(findings)


FORMATTED_CONTENT = (
    "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}{% for m in messages %}<{{ m.role }}>"
    "{{ '%s' | format(m.content) }}</s>{% endfor %}" + GEN
)


def test_tool_results_lost_in_llamacpp_are_reported() -> None:
    """Cause 2 (fixed): renders_tool_results comes from transformers only; llama.cpp leaves `'%s' | format(...)`
    unformatted, so its round-trip prompt has no tool result, yet the verdict says rendered and GT204 is silent
    (vLLM's llama3.2/llama4 pythonic and ToolACE templates lose the call arguments the same way)"""
    facts, findings = _audit(FORMATTED_CONTENT)
    assert facts.llamacpp is not None
    round_trip = facts.llamacpp.text(probes.ROUND_TRIP)
    assert round_trip is not None and probes.CANARY_RESULT not in round_trip
    assert facts.renders_tool_results is False
    assert any(f.code == "GT204" and "llama.cpp" in f.message for f in findings)


# -- cause 3: tools that vanish once a system message is sent are not reported ----------------------------------

CONTINUE_AFTER_SYSTEM = (
    "{% for m in messages %}{% if loop.first and m.role == 'system' %}<system>{{ m.content }}"
    "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}</s>{% continue %}"
    "{% elif loop.first and tools %}<system><tools>{{ tools | tojson }}</tools></s>{% endif %}"
    "<{{ m.role }}>{{ m.content }}</s>{% endfor %}" + GEN
)


def test_tools_lost_once_a_system_message_is_sent_are_reported() -> None:
    """Cause 3 (fixed): tools_in_prompt true but tools_with_system false (llama.cpp drops what a loop iteration
    printed before `{% continue %}`) raises nothing about the tools, and the engine differences skip the system-
    message probes (EXAONE 4.0/4.5, K-EXAONE: system prompt and tools lost in llama.cpp)"""
    facts, findings = _audit(CONTINUE_AFTER_SYSTEM)
    assert facts.tools_in_prompt is True and facts.tools_with_system is False
    assert any(d.probe in (probes.SYSTEM, probes.TOOLS_WITH_SYSTEM) for d in facts.engine_differences)
    lost = [f for f in findings if f.code != "GT105" and "tool" in f.message and "system message" in f.message]
    assert lost, [f.message for f in findings]


# -- cause 4: GT604's message shows text after the difference, not the difference --------------------------------

PREAMBLE = "You are a careful assistant; answer briefly and never invent facts. "
DIFFERENCE_DEEP_IN_THE_PROMPT = (
    "{{ '" + PREAMBLE + "' }}{% for m in messages %}<{{ m.role }}>{{ '%s' | format(m.content) }}"
    " (end of this turn; nothing else is written here)</s>{% endfor %}" + GEN
)


def test_engine_difference_message_shows_the_differing_text() -> None:
    _facts, findings = _audit(DIFFERENCE_DEEP_IN_THE_PROMPT)
    f = next(f for f in findings if f.code == "GT604" and f.extra.get("probe") == probes.PLAIN)
    assert "%s" in f.message and probes.CANARY_USER in f.message, f.message


# -- cause 5: special tokens other than bos/eos ----------------------------------------------------------------


def _sep_token_gguf(make_gguf: Any) -> Path:
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.tinymodel import byte_level_vocab
    from gguftpl.gguf.writer import Typed

    specials = ("<|im_start|>", "<|im_end|>", "<sep>")
    toks, _types, _merges = byte_level_vocab(specials)
    template = (
        "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + sep_token }}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return make_gguf(  # type: ignore[no-any-return]
        "sep.gguf",
        templates={"default": template},
        specials=specials,
        extra_kv={"tokenizer.ggml.seperator_token_id": Typed(ValueType.UINT32, toks.index("<sep>"))},
    )


def test_special_tokens_beyond_bos_and_eos_are_passed_as_transformers_does(make_gguf: Any) -> None:
    from gguftpl.audit import audit_file

    codes = {f.code: f for f in audit_file(_sep_token_gguf(make_gguf)).findings}
    assert "GT103" not in codes, codes["GT103"].message
    assert "GT604" in codes  # llama.cpp writes sep_token as '' where transformers writes '<sep>'


# -- cause 6: a thinking soft switch reads as a hidden trigger ----------------------------------------------------

SOFT_SWITCH = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if '/no_think' in messages[-1].content %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def test_a_thinking_soft_switch_is_not_a_hidden_trigger() -> None:
    _facts, findings = _audit(SOFT_SWITCH)
    assert "GT402" not in _codes(findings), [f.message for f in findings if f.code == "GT402"]


def test_verify_gives_transformers_the_special_tokens_too(make_gguf: Any) -> None:
    """verify's engine-agreement stage renders the transformers side with the file's sep_token as well: it
    reports the separator llama.cpp leaves empty, not a transformers error."""
    from gguftpl import verify_file

    result = verify_file(_sep_token_gguf(make_gguf))
    stage = next(s for s in result.stages if s.name == "engine agreement")
    assert stage.status == "fail", stage.evidence
    assert "<sep>" in stage.evidence and "raise" not in stage.evidence, stage.evidence
