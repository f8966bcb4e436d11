"""verify's stages claim only what they compared (issue 25 item 6): no 'byte-identical prompts' when the file has
no template for transformers to render, and stage 3 never says 'the template writes no text for a tool call'
while the audit's GT206 shows the call transformers rendered with that template (DeepSeek-R1-Distill's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gguftpl.verify.result import STAGE_AGREEMENT, STAGE_CALL

pytest.importorskip("xllamacpp")

DATA = Path(__file__).parent / "data"
R1_DISTILL = DATA / "templates" / "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"
DS_SPECIALS = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>")


def test_no_agreement_claimed_for_a_file_without_template(corpus_file: Callable[[str], Path]) -> None:
    from gguftpl.verify.stages import verify_file

    stage = verify_file(corpus_file("ggml-vocab-llama-spm.gguf")).stage(STAGE_AGREEMENT)
    assert stage.status == "skip", stage.evidence
    assert "byte-identical" not in stage.evidence and "transformers has none to render" in stage.evidence


def test_agreement_still_compared_for_a_real_template(corpus_file: Callable[[str], Path]) -> None:
    from gguftpl.verify.stages import verify_file

    stage = verify_file(corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")).stage(STAGE_AGREEMENT)
    assert stage.status == "pass" and "byte-identical" in stage.evidence


def test_call_stage_agrees_with_gt206_on_deepseek_r1_distill(make_gguf: Callable[..., Path]) -> None:
    from gguftpl.audit import audit_file
    from gguftpl.verify.stages import verify_file

    path = make_gguf(
        templates={"default": R1_DISTILL.read_text(encoding="utf-8")},
        specials=DS_SPECIALS,
        bos=DS_SPECIALS[0],
        eos=DS_SPECIALS[1],
    )
    (gt206,) = [f for f in audit_file(path).findings if f.code == "GT206"]
    assert "<｜tool▁call▁begin｜>" in gt206.evidence  # transformers renders the call
    stage = verify_file(path).stage(STAGE_CALL)
    assert stage.status == "fail"
    assert "the template writes no text" not in stage.evidence
    assert stage.evidence.startswith("llama.cpp's render of a history with a tool call holds no text for the call")
    assert "<｜tool▁call▁begin｜>" in stage.data["hf_call_text"] and "supports_tool_calls=no" in stage.evidence


SELECTATTR_IN_TOOLS = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n' }}{%- for t in tools %}{{ t | tojson }}{{ '\\n' }}"
    "{%- endfor %}{%- set texts = messages | selectattr('text', 'defined') | list %}{{- '<|im_end|>\\n' }}"
    "{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + (message.content or '')"
    " + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.mark.parametrize("engine", ["hf", "llamacpp"])
def test_llamacpp_row_follows_llamacpp_refusing_every_tools_request(
    make_gguf: Callable[..., Path], engine: str
) -> None:
    """issue 25 item 8: llama.cpp loads the template but fails every request with tools (``selectattr('text',
    'defined')`` in its engine); transformers renders the tools. On b62d41b (where the issue was filed) the llama.cpp
    row said "renders the default (the file has no tool_use), which puts the tool schemas in the prompt" for both
    engines (this test, adapted to that commit's RuntimeRow, failed there); the row now follows llama.cpp's own
    answer to the tools request."""
    from gguftpl.audit import AuditOptions, audit_file
    from gguftpl.runtimes.rows import FAILS

    path = make_gguf(templates={"default": SELECTATTR_IN_TOOLS})
    fa = audit_file(path, AuditOptions(engine=engine))
    assert fa.runtimes is not None
    row = next(r for r in fa.runtimes.rows if r.name == "llama.cpp")
    assert row.outcome == FAILS and row.tools_reach_prompt is not True, row
    assert "puts the tool schemas in the prompt" not in row.reason and "selectattr" in row.error
    vllm = next(r for r in fa.runtimes.rows if r.name == "vLLM")
    assert vllm.tools_reach_prompt is True  # transformers renders them: the rows differ by engine
    # the row and the findings tell one story: llama.cpp's own error on the tools probes (GT103), and the verdict
    # line counts llama.cpp among the runtimes whose engine raises, not among those the tools reach
    gt103 = [f for f in fa.findings if f.code == "GT103" and f.severity.value == "error"]
    assert any("tools probe fails in llama.cpp" in f.message and "unknown test 'text'" in f.message for f in gt103)
    from gguftpl.repair import verdict_line

    line = verdict_line(fa.runtimes)
    assert "llama.cpp" not in line.split(";")[0] and "llama.cpp" in line.split("its engine raises: ")[1], line
