"""``gguftpl render``: the exact prompt of each engine, where the tool schemas landed, the bundled samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.engines.transformers import render_hf
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from gguftpl.verify.render import DEFAULT_MESSAGES, DEFAULT_TOOLS, locate_tools, render_prompt

ROOT = Path(__file__).resolve().parent.parent
CHATML_SAMPLE = ROOT / "samples/hermes-2-pro-mistral-7b.chatml.gguf"
UPSTREAM_SAMPLE = ROOT / "samples/hermes-2-pro-mistral-7b.upstream.gguf"
NO_TEMPLATE_SAMPLE = ROOT / "samples/no-template.gguf"


def run(*args: Any) -> Any:
    return CliRunner().invoke(main_group, ["render", *map(str, args)])


def test_bundled_samples_are_the_defaults() -> None:
    conv = json.loads((ROOT / "samples/conversation.json").read_text(encoding="utf-8"))
    assert conv["messages"] == DEFAULT_MESSAGES
    assert json.loads((ROOT / "samples/tools.json").read_text(encoding="utf-8")) == DEFAULT_TOOLS


def test_hf_render_is_transformers_on_the_template_llamacpp_would_pick() -> None:
    tset = load_templateset(read_header(str(UPSTREAM_SAMPLE)))
    expected = render_hf(
        tset.templates["tool_use"].text, DEFAULT_MESSAGES, tools=DEFAULT_TOOLS, bos_token="<s>", eos_token="<|im_end|>"
    )
    res = run(UPSTREAM_SAMPLE, "--raw")
    assert res.exit_code == 0
    assert res.output == expected
    r = render_prompt(UPSTREAM_SAMPLE)
    assert r.template == "tool_use" and r.prompt == expected


def test_tool_schema_positions_are_reported() -> None:
    r = render_prompt(UPSTREAM_SAMPLE)
    desc = "Name of the city, e.g. Paris."
    line_of_desc = next(i for i, ln in enumerate(r.prompt.splitlines(), 1) if desc in ln)
    span = next(s for s in r.spans if s.kind == "property-description" and "city" in s.text)
    assert span.found and span.line == line_of_desc
    res = run(UPSTREAM_SAMPLE, "--no-color")
    assert res.exit_code == 0
    assert f"line {line_of_desc}" in res.output
    assert "--- tool get_current_weather:" in res.output
    assert "NOT in the prompt" not in res.output


def test_locate_tools_reports_missing_pieces() -> None:
    spans = locate_tools("nothing here", DEFAULT_TOOLS)
    assert spans and not any(s.found for s in spans)
    assert {s.kind for s in spans} == {"name", "description", "property", "property-description"}


def test_explicit_template_and_no_tools() -> None:
    r = render_prompt(UPSTREAM_SAMPLE, template="default")
    assert r.template == "default"
    assert not any(s.found for s in r.spans if s.kind != "property")  # ChatML drops the tools
    plain = run(UPSTREAM_SAMPLE, "--no-tools", "--raw")
    assert plain.exit_code == 0 and "get_current_weather" not in plain.output
    unknown = run(UPSTREAM_SAMPLE, "--template", "rag")
    assert unknown.exit_code == 2 and "no such template" in unknown.output


def test_messages_file(tmp_path: Path) -> None:
    conv = tmp_path / "c.json"
    conv.write_text(json.dumps([{"role": "user", "content": "qz7messagefile"}]), encoding="utf-8")
    res = run(CHATML_SAMPLE, "--messages", conv, "--raw", "--no-tools")
    assert res.output == "<|im_start|>user\nqz7messagefile<|im_end|>\n<|im_start|>assistant\n"
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": 3}', encoding="utf-8")
    res = run(CHATML_SAMPLE, "--messages", bad)
    assert res.exit_code == 2 and "expected a list of messages" in res.output


def test_no_template_hf_refuses_llamacpp_falls_back() -> None:
    res = run(NO_TEMPLATE_SAMPLE)
    assert res.exit_code == 2 and "no chat template" in res.output
    pytest.importorskip("xllamacpp")
    r = render_prompt(NO_TEMPLATE_SAMPLE, engine="llamacpp")
    assert r.template == "fallback"
    assert r.prompt.startswith("<|im_start|>system\n")
    assert any("fallback" in n for n in r.notes)


def test_llamacpp_engine_shows_dropped_tools_and_agrees_after_bos() -> None:
    pytest.importorskip("xllamacpp")
    res = run(CHATML_SAMPLE, "--engine", "llamacpp", "--no-color")
    assert res.exit_code == 0
    assert "--- tool get_current_weather: NOT in the prompt" in res.output
    assert "supports_tools=false" in res.output
    lp = render_prompt(UPSTREAM_SAMPLE, engine="llamacpp")
    hp = render_prompt(UPSTREAM_SAMPLE, engine="hf")
    assert lp.template == hp.template == "tool_use"
    # llama.cpp drops the leading BOS text the template writes (it adds BOS as a token)
    assert hp.prompt == "<s>" + lp.prompt


def test_color_highlights_each_schema_piece() -> None:
    res = run(UPSTREAM_SAMPLE, "--color")
    assert res.exit_code == 0
    assert "\x1b[7m" in res.output  # reverse video around the tool pieces
    assert "\x1b[" not in run(UPSTREAM_SAMPLE, "--no-color").output


def test_llamacpp_engine_with_an_explicit_template_overrides_its_choice() -> None:
    pytest.importorskip("xllamacpp")
    r = render_prompt(UPSTREAM_SAMPLE, engine="llamacpp", template="default")
    assert r.template == "default"
    assert "get_current_weather" not in r.prompt
    assert r.prompt == render_prompt(UPSTREAM_SAMPLE, engine="hf", template="default").prompt.removeprefix("<s>")
