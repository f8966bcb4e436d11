"""Engine comparison in verify: does llama.cpp render the same prompt as transformers (Hugging Face semantics)?

The model was trained and evaluated on transformers' rendering; where llama.cpp's Jinja engine differs, prompts
differ between runtimes. Verify's fifth stage, and ``render``'s evidence, come from :func:`compare_engines`; the
comparison itself is :func:`gguftpl.templates.enginediff.compare_prompts`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gguftpl.templates.enginediff import Agreement, compare_with_llamacpp
from gguftpl.verify.result import FAIL, PASS, SKIP, STAGE_AGREEMENT, Stage

if TYPE_CHECKING:
    from gguftpl.engines.llamacpp_session import LlamaCppSession, Message


def compare_engines(
    s: LlamaCppSession,
    template_text: str,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    llama_prompt: str | None = None,
) -> Agreement:
    """Render the same request with llama.cpp (the session) and with Hugging Face semantics and compare, as the
    audit does (:func:`gguftpl.templates.enginediff.compare_with_llamacpp`: the conversation as llama.cpp hands it
    to the template, the session's capabilities, variables and special tokens)."""
    if llama_prompt is None:
        llama_prompt = s.apply_template(messages, tools)
    return compare_with_llamacpp(
        template_text,
        messages,
        tools,
        llama_prompt,
        s.bos_token,
        s.eos_token,
        caps=s.caps,
        specials=s.template_specials(),
    )


def agreement_stage(
    s: LlamaCppSession,
    template_text: str,
    requests: list[tuple[str, list[Message], str | None]],
    tools: list[dict[str, Any]],
) -> Stage:
    checked: list[dict[str, Any]] = []
    for label, msgs, lp in requests:
        if lp is None:
            continue
        ag = compare_engines(s, template_text, msgs, tools, lp)
        d = ag.difference
        entry = {"request": label, "identical": ag.identical, "normalised": ag.normalised}
        if ag.hf_error is not None:
            entry["hf_error"] = ag.hf_error
            return Stage(
                STAGE_AGREEMENT,
                FAIL,
                f"{label}: llama.cpp renders it, transformers (HF semantics) cannot: {ag.hf_error}",
                {"requests": [*checked, entry]},
            )
        if d is not None:
            assert ag.hf_prompt is not None
            at = d.at
            entry.update(first_difference=at, llama=ag.llama_prompt[at : at + 80], hf=ag.hf_prompt[at : at + 80])
            return Stage(
                STAGE_AGREEMENT,
                FAIL,
                f"{label}: the prompts differ from character {at} (line {d.line}): llama.cpp "
                f"{d.engine!r} vs HF {d.transformers!r} (normalised: {'; '.join(ag.normalised)})",
                {"requests": [*checked, entry], "llama_prompt": ag.llama_prompt, "hf_prompt": ag.hf_prompt},
            )
        checked.append(entry)
    if not checked:
        return Stage(STAGE_AGREEMENT, SKIP, "llama.cpp rendered no request to compare")
    return Stage(
        STAGE_AGREEMENT,
        PASS,
        "llama.cpp and transformers (HF semantics) render byte-identical prompts for "
        + " and ".join(c["request"] for c in checked)
        + f" (normalised: {'; '.join(checked[0]['normalised'])})",
        {"requests": checked},
    )
