"""Special-token checks: markers a template emits versus the vocabulary, the end-of-turn marker versus
EOS/EOT, and BOS written by the template while the tokenizer adds one."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Control-marker shapes a vocabulary must hold as single tokens: `<|…|>`, DeepSeek's fullwidth `<｜…｜>`,
# Gemma 4's half-open `<|turn>` / `<turn|>`. XML-like tags (`<tools>`) and `[INST]` are plain text in
# many models, so their absence from the vocabulary proves nothing.
_CONTROL = re.compile(r"<\|[^<>|\s]{1,48}\|>|<｜[^<>｜]{1,48}｜>|<\|\w{1,48}>|<\w{1,48}\|>")
# What may end an assistant turn right after its content.
_TURN_END = re.compile(
    r"\s*(<\|[^<>|\s]{1,48}\|>|<｜[^<>｜]{1,48}｜>|<\|\w{1,48}>|<\w{1,48}\|>|</?[A-Za-z_][\w:.\-]{0,40}>|\[/?[A-Z_]{2,24}\])"
)

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

LLAMACPP_EOG_BY_TEXT = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "<|end_of_text|>",
        "<end_of_utterance>",
    }
)
"""Tokens llama.cpp adds to its end-of-generation set by their text (llama-vocab.cpp, late 2025)."""


def control_markers(texts: Iterable[str]) -> list[str]:
    """Control-shaped markers found in rendered prompts, in first-seen order."""
    seen: dict[str, None] = {}
    for text in texts:
        for m in _CONTROL.findall(text):
            seen.setdefault(m, None)
    return list(seen)


def end_of_turn_marker(rendered: str, content: str, eos_token: str = "") -> str | None:
    """The marker a template writes right after an assistant message's ``content``."""
    at = rendered.find(content)
    if at < 0:
        return None
    rest = rendered[at + len(content) :]
    if eos_token and rest.lstrip().startswith(eos_token):
        return eos_token
    m = _TURN_END.match(rest)
    return m.group(1) if m else None
