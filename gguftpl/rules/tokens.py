"""GT3xx: special tokens: markers in the vocabulary, end of turn, BOS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gguftpl.findings import Finding, Rule, Severity, check, register
from gguftpl.gguf import tokens
from gguftpl.rules.context import FileContext
from gguftpl.templates.facts import trim

if TYPE_CHECKING:
    from gguftpl.templates.facts import TemplateFacts

MARKER_NOT_IN_VOCAB = register(
    Rule(
        "GT301",
        "marker-not-in-vocab",
        Severity.WARNING,
        "The template emits a control marker (`<|…|>`-shaped) that is not a token of the vocabulary.",
        why="The marker is tokenized as several plain-text pieces; the model was trained on a single "
        "control token and does not recognise the turn structure or tool markers.",
        example="`<|im_start|>` in a template of a model whose vocabulary has no such token.",
        fix="Use the template that belongs to this model's tokenizer.",
    )
)


@check(MARKER_NOT_IN_VOCAB, "template")
def marker_not_in_vocab(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    vocab = ctx.vocab
    if vocab is None or not vocab.has_vocab:
        return
    for marker in t.markers:
        if vocab.token_id(marker) is None:
            yield ctx.finding(
                MARKER_NOT_IN_VOCAB,
                f"the template emits {marker!r}, which is not a token of the vocabulary",
                t,
                evidence=marker,
                marker=marker,
            )


MARKER_NOT_CONTROL = register(
    Rule(
        "GT302",
        "marker-not-control-token",
        Severity.WARNING,
        "A control marker the template emits is in the vocabulary but typed NORMAL, not CONTROL/USER_DEFINED.",
        why="llama.cpp only parses CONTROL and USER_DEFINED tokens out of prompt text; a NORMAL token may be "
        "split into pieces, so the model sees text instead of the marker.",
        example="`<|im_end|>` stored with token type 1.",
        fix="Re-convert the model with the right added-token types.",
    )
)


@check(MARKER_NOT_CONTROL, "template")
def marker_not_control(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    vocab = ctx.vocab
    if vocab is None or not vocab.has_vocab:
        return
    for marker in t.markers:
        tid = vocab.token_id(marker)
        ttype = vocab.token_type(tid) if tid is not None else None
        if ttype is not None and ttype not in (tokens.CONTROL, tokens.USER_DEFINED):
            yield ctx.finding(
                MARKER_NOT_CONTROL,
                f"{marker!r} is token {tid} of type {ttype} (expected CONTROL 3 or USER_DEFINED 4)",
                t,
                evidence=marker,
                marker=marker,
                token_id=tid,
                token_type=ttype,
            )


END_OF_TURN_NOT_EOG = register(
    Rule(
        "GT303",
        "end-of-turn-not-stop-token",
        Severity.WARNING,
        "The marker that ends an assistant turn in the template is not the EOS/EOT token.",
        why="Generation does not stop at the end of the turn unless the runtime guesses the marker (llama.cpp "
        "recognises a few well-known ones by text); the model keeps writing the next turn.",
        example="ChatML `<|im_end|>` while `tokenizer.ggml.eos_token_id` points at `</s>`.",
        fix="Set `tokenizer.ggml.eos_token_id` (or `eot_token_id`) to the end-of-turn token.",
    )
)


@check(END_OF_TURN_NOT_EOG, "template")
def end_of_turn_not_eog(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    tset, eot = ctx.tset, t.end_of_turn
    stops = {role: tok for role, tok in tset.special_tokens.items() if role in ("eos", "eot", "eom")} if tset else {}
    if not eot or not stops or tset is None:
        return
    stop_texts = {tok.text for tok in stops.values() if tok.text}
    eot_id = ctx.vocab.token_id(eot) if ctx.vocab is not None else None
    if eot in stop_texts or (eot_id is not None and eot_id in {tok.id for tok in stops.values()}):
        return
    names = ", ".join(f"{role}={tok.text!r}" for role, tok in stops.items())
    known = eot in tokens.LLAMACPP_EOG_BY_TEXT
    why = (
        "llama.cpp stops on it by name, other runtimes that stop on EOS/EOT do not"
        if known
        else "generation may not stop"
    )
    yield ctx.finding(
        END_OF_TURN_NOT_EOG,
        f"assistant turns end with {eot!r}, which is not a stop token ({names}): {why}",
        t,
        severity=Severity.INFO if known else None,
        evidence=eot,
        marker=eot,
    )


DOUBLE_BOS = register(
    Rule(
        "GT304",
        "double-bos",
        Severity.INFO,
        "The template writes the BOS token while the tokenizer also adds one (`add_bos_token` is true).",
        why="A client that renders the prompt itself and tokenizes it with special tokens added gets two BOS "
        "tokens, which degrades output. The runtimes do not: llama.cpp (and LM Studio on it) strips one leading "
        "BOS from the rendered prompt, and transformers' `apply_chat_template` and vLLM's chat endpoint tokenize "
        "the prompt without adding special tokens. Upstream templates often do this on purpose, so it is info.",
        example="`{{ bos_token }}{% for message in messages %}…` with `tokenizer.ggml.add_bos_token = true`.",
        fix="Drop `{{ bos_token }}` from the template or set `add_bos_token` to false, if your client tokenizes "
        "rendered prompts with special tokens.",
    )
)


@check(DOUBLE_BOS, "template")
def double_bos(t: TemplateFacts, ctx: FileContext) -> Iterator[Finding]:
    if ctx.tset is None or not ctx.tset.add_bos or not t.starts_with_bos:
        return
    yield ctx.finding(
        DOUBLE_BOS,
        f"the template writes BOS {ctx.special_text('bos')!r} and add_bos_token is true: a client that tokenizes "
        "the rendered prompt with special tokens gets two (llama.cpp strips one leading BOS; transformers and "
        "vLLM chat add none)",
        t,
        evidence=trim(t.prompts.get("plain", ""), 120),
    )
