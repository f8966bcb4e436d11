"""Real templates from outside the llama.cpp corpus (tests/data/real_templates, with provenance), each a case
the corpus did not cover: a call written only in history, a call id written where the name belongs, and
messages a template drops without an error."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from gguftpl.analysis import analyze_template_text, template_findings
from gguftpl.audit import AuditOptions, audit_file
from gguftpl.templates import probes
from gguftpl.templates.dialect import classify, render_call

REAL = Path(__file__).resolve().parent / "data" / "real_templates"


def _text(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def _codes(report: object) -> set[str]:
    return {f.code for f in template_findings(report)}


def test_every_real_template_has_provenance() -> None:
    provenance = (REAL / "PROVENANCE.md").read_text(encoding="utf-8")
    files = sorted(REAL.glob("*.jinja"))
    assert files
    for path in files:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert re.search(rf"\| {re.escape(path.name)} \| .+ \| \d+ \| {digest} \|", provenance), path.name


def test_call_written_only_in_history_is_found() -> None:
    """Nemotron's template renders a final assistant message as a prefill (content only); its calls appear
    once the conversation goes on. Before, audit reported GT203 and dialect 'none' for it."""
    text = _text("vllm-tool_chat_template_nemotron_json.jinja")
    rendering = render_call(text)
    assert rendering.rendered_call
    assert rendering.text.startswith("<TOOLCALL>[") and rendering.text.endswith("]</TOOLCALL>")
    assert probes.CANARY_TOOL_NAME in rendering.text and probes.CANARY_ARG_VALUE in rendering.text
    report = analyze_template_text(text, bos_token="<s>", eos_token="</s>")
    assert report.renders_tool_calls is True
    assert report.dialect == "generic-json"
    assert "GT203" not in _codes(report)


def test_template_that_never_writes_calls_still_gets_gt203() -> None:
    """Continuing the conversation must not invent a call: a template that prints only the content of an
    assistant message keeps its GT203 (the call probe tries three endings, none renders the call)."""
    content_only = _text("vllm-tool_chat_template_nemotron_json.jinja").replace(
        "{%- if message.tool_calls -%}", "{%- if false -%}"
    )
    report = analyze_template_text(content_only, bos_token="<s>", eos_token="</s>")
    assert report.renders_tool_calls is False
    assert "GT203" in _codes(report)


def test_call_id_written_where_the_name_belongs_is_reported() -> None:
    report = analyze_template_text(_text("moonshotai-Kimi-K2-Thinking.jinja"), bos_token="<s>", eos_token="</s>")
    assert report.dialect == "kimi"
    found = {f.code: {**f.to_dict(), "line": f.location.line} for f in template_findings(report)}
    assert "GT209" in found
    assert probes.CANARY_CALL_ID in found["GT209"]["evidence"]
    assert f"functions.{probes.CANARY_TOOL_NAME}:0" in found["GT209"]["message"]
    assert report.call.id_in_place_of_name is True


def test_kimi_templates_that_build_the_id_from_the_name_are_not_reported() -> None:
    corpus = REAL.parent / "templates"
    for name in ("moonshotai-Kimi-K2.jinja", "Kimi-K2-Instruct.jinja"):
        text = (corpus / name).read_text(encoding="utf-8")
        assert "GT209" not in _codes(analyze_template_text(text, bos_token="<s>", eos_token="</s>")), name


def test_audit_reports_the_call_id_on_a_gguf(make_gguf: Callable[..., Path]) -> None:
    text = _text("moonshotai-Kimi-K2-Thinking.jinja")
    specials = sorted(set(re.findall(r"<\|[a-z_]+\|>", text)))
    path = make_gguf("kimi.gguf", templates={"default": text}, specials=tuple(specials), bos=None, eos="<|im_end|>")
    result = audit_file(path, AuditOptions(engine="hf-only"))
    gt209 = [f for f in result.findings if f.code == "GT209"]
    assert len(gt209) == 1 and gt209[0].template == "default"
    assert gt209[0].severity.value == "info"


def test_name_keyed_json_calls_are_apertus() -> None:
    assert classify('<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>') == ("apertus", "rendered")
    assert classify('[{"f": {}}, {"g": {"x": 2}}]') == ("apertus", "rendered")
    # a call object with named parts stays generic JSON; a bare scalar value is not a call
    assert classify('[{"name": "f", "arguments": {"x": 1}}]') == ("generic-json", "rendered")
    assert classify('{"f": 1}') == ("unknown", "rendered")


def test_messages_a_template_drops_silently_are_reported() -> None:
    report = analyze_template_text(_text("vllm-tool_chat_template_granite.jinja"), bos_token="<s>", eos_token="</s>")
    gt105 = [f.to_dict() for f in template_findings(report) if f.code == "GT105"]
    assert {f["extra"]["role"] for f in gt105} == {"system", "assistant"}
    assert all(f.get("severity", "warning") == "warning" for f in gt105)
    assert list(report.dropped) == ["system message", "assistant reply"]
    # the tools do reach the prompt; calls and results do not
    assert report.tools_in_prompt is True
    assert {"GT203", "GT204"} <= _codes(report)


def test_a_template_that_keeps_every_role_has_no_gt105() -> None:
    kimi = analyze_template_text(_text("moonshotai-Kimi-K2-Thinking.jinja"), bos_token="<s>", eos_token="</s>")
    assert "GT105" not in _codes(kimi) and not kimi.dropped


def test_gt105_needs_the_user_text_in_the_prompt() -> None:
    """A template that renders no message at all (here: nothing) is not reported as dropping a role."""
    for text in ("", "{{ bos_token }}"):
        assert "GT105" not in _codes(analyze_template_text(text, bos_token="<s>"))


def test_a_template_that_does_not_parse_still_names_the_dialect_its_text_teaches() -> None:
    """vLLM's DeepSeek-V3.1 tool template has `{% set tool_json = tool | tojson}` (no `%`): nothing renders,
    but its text spells out DeepSeek's call markers. Before, the dialect was 'unknown'."""
    text = _text("vllm-tool_chat_template_deepseekv31.jinja")
    report = analyze_template_text(text, bos_token="<s>", eos_token="</s>")
    assert "GT102" in _codes(report)
    assert (report.dialect, report.dialect_source) == ("deepseek", "literal")
    broken_chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    assert analyze_template_text(broken_chatml).dialect == "unknown"


def test_mistral_example_drops_calls_and_the_system_message() -> None:
    report = analyze_template_text(_text("vllm-tool_chat_template_mistral.jinja"), bos_token="<s>", eos_token="</s>")
    assert report.renders_tool_calls is False and report.tools_in_prompt is True
    assert {"GT203", "GT105"} <= _codes(report)
    assert list(report.dropped) == ["system message"]
