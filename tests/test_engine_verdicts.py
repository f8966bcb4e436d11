"""Issue 13's acceptance, template by template over every real template the project carries: the verdicts
gguftpl reports agree with llama.cpp itself.

Each template is labelled here by llama.cpp's own rendering, through an in-process llama-server (xllamacpp)
of this test, independent of gguftpl's analysis (which asks llama.cpp through its bounded worker):
- ``tools_in_prompt`` is a boolean equal to whether llama.cpp's prompt for a user-only conversation sent with
  the canary tool carries the canary schema, on every template llama.cpp renders that conversation for;
- a template whose tools show only once a system message is sent carries GT210;
- no error-severity GT103 on a template llama.cpp renders every probe conversation of;
- GT606 exactly on the templates llama.cpp refuses to load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gguftpl.analysis import analyze_template_text, template_findings
from gguftpl.templates import probes

pytest.importorskip("xllamacpp")

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = sorted(
    [
        *(ROOT / "tests" / "data" / "templates").glob("*.jinja"),
        *(ROOT / "tests" / "data" / "real_templates").rglob("*.jinja"),
        *(ROOT / "tests" / "data" / "hermes").glob("*.jinja"),
        *(ROOT / "upstream_templates").rglob("*.jinja"),
    ]
)
BOS, EOS = "<s>", "</s>"


def _llamacpp_labels(text: str) -> dict[str, Any]:
    """What llama.cpp does with ``text`` as a file's default template, asked directly."""
    from gguftpl.engines.llamacpp_session import LlamaCppLoadError, LlamaCppSession
    from gguftpl.errors import LlamaCppError

    try:
        session = LlamaCppSession(templates={"default": text}, specials=(BOS, EOS), n_ctx=512)
        session.start()
    except LlamaCppLoadError:
        return {"refused": True}
    try:
        prompts: dict[str, str | None] = {}
        for name, msgs, tools, agp in probes.engine_probes():
            try:
                prompts[name] = session.apply_template(msgs, tools, add_generation_prompt=agp)
            except LlamaCppError:
                prompts[name] = None
        return {"refused": False, "prompts": prompts}
    finally:
        session.close()


def _has_canary(prompt: str | None) -> bool:
    return prompt is not None and probes.CANARY_TOOL_NAME in prompt and probes.CANARY_PARAM_TOKEN in prompt


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_verdicts_agree_with_llamacpp(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    label = _llamacpp_labels(text)
    facts = analyze_template_text(text, bos_token=BOS, eos_token=EOS, llamacpp=True)
    findings = template_findings(facts)
    codes = {f.code for f in findings}
    if label["refused"]:
        assert "GT606" in codes, "llama.cpp refuses this template: GT606 expected"
        return
    assert "GT606" not in codes, "llama.cpp loads this template: no GT606"
    prompts = label["prompts"]
    user_only = prompts[probes.TOOLS]
    if user_only is not None:
        assert facts.tools_in_prompt is _has_canary(user_only)
        assert facts.tools_engine == "llama.cpp"
        if not _has_canary(user_only) and _has_canary(prompts[probes.TOOLS_WITH_SYSTEM]):
            assert "GT210" in codes, "tools only with a system message: GT210 expected"
    if all(p is not None for p in prompts.values()):
        errors = [f for f in findings if f.code == "GT103" and f.severity.value == "error"]
        assert not errors, [f.message for f in errors]


def test_the_corpus_covers_the_cases() -> None:
    """Enough real templates, and among them both verdicts."""
    assert len(TEMPLATES) >= 70
