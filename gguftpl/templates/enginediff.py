"""Do two engines render one conversation alike? transformers' prompt against the one llama.cpp rendered, with
what llama.cpp passes to every template normalised away (:func:`compare_prompts`), and the conversation as
llama.cpp hands it to the template (:func:`compare_with_llamacpp`). The facts (GT604) and verify's agreement stage
both call it, and every engine difference is located by :func:`locate_difference`, so they name one offset.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gguftpl.engines.llamacpp_env import llamacpp_date_string

Message = dict[str, Any]


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def first_difference(a: str, b: str) -> int | None:
    if a == b:
        return None
    return _common_prefix(a, b)


DIFFERENCE_RADIUS = 40
"""Characters shown on each side of the first difference."""


def difference_window(text: str, at: int, radius: int = DIFFERENCE_RADIUS) -> str:
    """``text`` around its first difference ``at``, on both sides (the differing text in the middle), so a
    difference deep in a long prompt is shown, not what follows it."""
    return text[max(0, at - radius) : at + radius]


@dataclass(frozen=True)
class Difference:
    """Where an engine's prompt first differs from transformers': the one computation of the offset, its line
    and the text around it, for the audit's facts (GT604), the other engines' rows and verify's agreement stage."""

    at: int
    """First differing character (0-based) of the two prompts as compared."""
    line: int
    """1-based line of ``at`` in the engine's prompt."""
    engine: str
    """The engine's text around the difference (:func:`difference_window`)."""
    transformers: str


def locate_difference(engine_prompt: str, hf_prompt: str) -> Difference | None:
    """Where ``engine_prompt`` first differs from ``hf_prompt``; None when they are equal."""
    at = first_difference(engine_prompt, hf_prompt)
    if at is None:
        return None
    line = engine_prompt.count("\n", 0, at) + 1
    return Difference(at, line, difference_window(engine_prompt, at), difference_window(hf_prompt, at))


@dataclass
class Agreement:
    identical: bool
    normalised: list[str]
    """What was normalised before comparing (see :func:`compare_prompts`)."""
    hf_prompt: str | None
    llama_prompt: str
    difference: Difference | None = None
    """Where the prompts (as compared) first differ; None when identical or transformers raised."""
    hf_error: str | None = None

    @property
    def first_difference(self) -> int | None:
        return self.difference.at if self.difference is not None else None


def compare_with_llamacpp(
    template_text: str,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    llama_prompt: str,
    bos: str,
    eos: str,
    *,
    caps: Mapping[str, bool],
    specials: Mapping[str, Any] | None = None,
) -> Agreement:
    """llama.cpp's prompt for ``messages`` against transformers', transformers given the conversation as llama.cpp
    hands it to the template whose capabilities are ``caps`` (``probes.llamacpp_messages``: system folded, text
    parts) and llama.cpp's variables (:func:`compare_prompts`): the comparison the audit (GT604) and verify's
    agreement stage both make, so the same template and conversation give the same difference in both."""
    from gguftpl.templates.probes import llamacpp_messages

    return compare_prompts(
        template_text, llamacpp_messages(messages, dict(caps)), tools, llama_prompt, bos, eos, specials=specials
    )


def compare_prompts(
    template_text: str,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    llama_prompt: str,
    bos: str,
    eos: str,
    *,
    specials: Mapping[str, Any] | None = None,
) -> Agreement:
    """Render with Hugging Face semantics (``render_hf``) the request llama.cpp rendered as ``llama_prompt``
    (passing the ``bos``/``eos`` texts llama.cpp reports) and compare.

    Normalised, and only this: (1) HF gets the variables llama.cpp passes to every template — the same
    ``bos_token``/``eos_token`` strings llama.cpp reports, ``date_string`` (today, ``%d %b %Y``) and
    ``enable_thinking`` (llama.cpp's value is not reported: both ``false`` and ``true`` are tried, and the
    one used is named); (2) llama.cpp drops a leading BOS text from the prompt (it adds BOS as a token),
    so a leading ``bos_token`` is removed from the HF prompt when llama.cpp's does not start with it;
    (3) when the prompts still differ and the template prints the clock (``strftime_now`` with a format
    whose text changes within the last minutes, e.g. ``%H:%M:%S``), every text that format gives for an
    instant of that window is masked in both prompts: the engines rendered at different seconds.
    ``specials`` (``sep_token`` …) go to HF alone: transformers passes its tokenizer's other special tokens,
    llama.cpp does not.
    """
    from gguftpl.engines.transformers import TemplateRenderError, render_hf

    window_end = time.time()
    best: Agreement | None = None
    for thinking in (False, True):
        norm = [f"date_string={llamacpp_date_string()!r}", f"enable_thinking={str(thinking).lower()}"]
        try:
            hf = render_hf(
                template_text,
                messages,
                tools=tools,
                add_generation_prompt=True,
                bos_token=bos,
                eos_token=eos,
                date_string=llamacpp_date_string(),
                enable_thinking=thinking,
                **(specials or {}),
            )
        except TemplateRenderError as exc:
            return Agreement(False, norm, None, llama_prompt, hf_error=str(exc))
        if bos and hf.startswith(bos) and not llama_prompt.startswith(bos):
            hf = hf[len(bos) :]
            norm.append("leading bos_token removed from the HF prompt")
        lp = llama_prompt
        if hf != lp:
            masked = _mask_clock(template_text, [hf, lp], window_end - CLOCK_WINDOW_S, time.time() + 2)
            if masked is not None:
                (hf, lp), formats = masked
                norm.append(f"clock text of strftime_now({', '.join(map(repr, formats))}) masked")
        ag = Agreement(hf == lp, norm, hf, lp, locate_difference(lp, hf))
        if ag.identical:
            return ag
        if best is None or (ag.first_difference or 0) > (best.first_difference or 0):
            best = ag
    assert best is not None
    return best


CLOCK_WINDOW_S = 600
"""How far back ``compare_engines`` looks for the instant llama.cpp rendered a prompt it was handed."""


def _mask_clock(template_text: str, prompts: list[str], start: float, end: float) -> tuple[list[str], list[str]] | None:
    """``prompts`` with every text of a clock-dependent ``strftime_now(FORMAT)`` call of the template (a
    constant FORMAT whose output changes between ``start`` and ``end``) replaced by ``<strftime_now(FORMAT)>``,
    and those formats; None when the template prints no such clock text or none of it is in the prompts."""
    from jinja2 import TemplateSyntaxError

    from gguftpl.templates.static import strftime_formats

    try:
        formats = strftime_formats(template_text)
    except (TemplateSyntaxError, RecursionError):  # a template jinja2 cannot parse: nothing to mask
        return None
    out = list(prompts)
    used: list[str] = []
    for fmt in formats:
        texts: set[str] = set()
        t = int(start)
        while t <= end:
            texts.add(time.strftime(fmt, time.localtime(t)))
            t += 1
        if len(texts) < 2:
            continue  # a date-only format: both engines print the same text
        mask = f"<strftime_now({fmt!r})>"
        hit = False
        for text in sorted((x for x in texts if x.strip()), key=len, reverse=True):
            if any(text in p for p in out):
                hit = True
                out = [p.replace(text, mask) for p in out]
        if hit:
            used.append(fmt)
    return (out, used) if used else None
