"""gguftpl's jinja2-only renderer against transformers' own: byte-equal prompts (or the same exception) for
every template of the corpus and the catalog, over every probe conversation the analysis sends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gguftpl.engines import transformers_env as jinja_env
from gguftpl.templates import probes

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = sorted(
    [
        *(ROOT / "tests" / "data" / "templates").glob("*.jinja"),
        *(ROOT / "tests" / "data" / "real_templates").rglob("*.jinja"),
        *(ROOT / "tests" / "data" / "hermes").glob("*.jinja"),
        *(ROOT / "upstream_templates").rglob("*.jinja"),
    ]
)


def _conversations() -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None, bool]]:
    """name -> (messages, tools, add_generation_prompt): the analysis' probes and the shapes clients send."""
    call = probes.tool_call()
    string_call = probes.tool_call(string_arguments=True)
    tools = probes.canary_tools()
    return {
        "plain": (probes.plain_conversation(), None, True),
        "plain, no generation prompt": (probes.plain_conversation(), None, False),
        "tools": (probes.tools_conversation(), tools, True),
        "system with tools": (probes.plain_conversation(system=True), tools, True),
        "multi-turn": (probes.multi_turn_conversation(), None, True),
        "call": (probes.tool_call_conversation(call), tools, False),
        "call, content None": (probes.tool_call_conversation(call, None), tools, False),
        "call, string arguments": (probes.tool_call_conversation(string_call), tools, False),
        "round trip": (probes.tool_round_trip_conversation(call), tools, True),
        "content parts": ([{"role": "user", "content": [{"type": "text", "text": probes.CANARY_USER}]}], None, True),
        "reasoning": (
            [
                {"role": "user", "content": probes.CANARY_USER},
                {"role": "assistant", "content": probes.CANARY_ASSISTANT, "reasoning_content": "qz7think"},
                {"role": "user", "content": probes.CANARY_USER + "2"},
            ],
            None,
            True,
        ),
    }


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as exc:  # the same exception type and message is the same behaviour
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_prompts_equal_transformers(path: Path) -> None:
    from transformers.utils import chat_template_utils as ctu

    text = path.read_text(encoding="utf-8")
    kwargs = {"bos_token": "<s>", "eos_token": "</s>"}
    for name, (messages, tools, agp) in _conversations().items():
        theirs = _outcome(
            lambda **kw: ctu.render_jinja_template(**kw)[0][0],
            conversations=[json.loads(json.dumps(messages))],
            tools=json.loads(json.dumps(tools)) if tools is not None else None,
            chat_template=text,
            add_generation_prompt=agp,
            **kwargs,
        )
        ours = _outcome(jinja_env.render, text, messages, tools, agp, **kwargs)
        assert ours == theirs, f"{path.name}: {name}"


def test_the_corpus_is_here_and_mostly_renders() -> None:
    assert len(TEMPLATES) >= 60
    plain = probes.plain_conversation()
    rendered = sum(
        _outcome(jinja_env.render, p.read_text(encoding="utf-8"), plain, None, True)[0] == "ok" for p in TEMPLATES
    )
    assert rendered >= len(TEMPLATES) * 0.8  # an equality of errors alone would prove little


def test_generation_tag_and_namespace_guard() -> None:
    text = "{% generation %}{{ messages[0].content }}{% endgeneration %}{% set ns = namespace(a=1) %}{{ ns.a }}"
    assert jinja_env.render(text, [{"role": "user", "content": "x"}]) == "x1"
    with pytest.raises(Exception, match="underscore"):
        jinja_env.render("{% set ns = namespace(_x=1) %}", [])


def test_output_bound_stops_while_streaming() -> None:
    with pytest.raises(jinja_env.OutputTooLarge):
        jinja_env.render("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", [], max_output=1000)


def test_normalize_messages_is_transformers_own() -> None:
    from transformers.utils import chat_template_utils as ctu

    conv = probes.tool_round_trip_conversation(probes.tool_call(), None)
    conv.append({"role": "assistant", "content": None, "tool_calls": None, "reasoning_content": "x"})
    assert jinja_env.normalize_messages(conv) == ctu._normalize_chat_messages(conv)
