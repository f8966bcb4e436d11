"""A tiny llama body that llama.cpp can load: for committed samples, test fixtures and verification
stand-ins (the user's tokenizer keys transplanted onto it, see RESEARCH §5).

Weights are F32 zeros (or a seeded pattern): the point is that llama.cpp loads the file, renders templates,
tokenises and parses, not that it generates anything useful.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from gguftpl.gguf.reader import ValueType
from gguftpl.gguf.writer import TensorSpec, Typed

F32 = 0


def gpt2_byte_tokens() -> list[str]:
    """The 256 byte-level BPE symbols of GPT-2 (bytes_to_unicode), in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs, strict=True))
    return [chr(table[b]) for b in range(256)]


def byte_level_vocab(
    specials: Iterable[str] = (), *, extra_normal: Iterable[str] = ()
) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) for a gpt2-style tokenizer that can encode any text.

    Specials are appended as CONTROL tokens after the byte symbols and ``extra_normal`` words.
    """
    tokens = gpt2_byte_tokens()
    types = [1] * len(tokens)
    merges = ["Ġ t", "h e"]
    for word in ("Ġt", "he"):
        tokens.append(word)
        types.append(1)
    for w in extra_normal:
        if w not in tokens:
            tokens.append(w)
            types.append(1)
    for s in specials:
        if s not in tokens:
            tokens.append(s)
            types.append(3)
    return tokens, types, merges


def tiny_llama_kv(*, context_length: int = 4096, n_embd: int = 16, n_head: int = 4, n_ff: int = 32) -> dict[str, Any]:
    return {
        "general.architecture": "llama",
        "general.file_type": Typed(ValueType.UINT32, 0),
        "llama.context_length": Typed(ValueType.UINT32, context_length),
        "llama.embedding_length": Typed(ValueType.UINT32, n_embd),
        "llama.block_count": Typed(ValueType.UINT32, 1),
        "llama.feed_forward_length": Typed(ValueType.UINT32, n_ff),
        "llama.attention.head_count": Typed(ValueType.UINT32, n_head),
        "llama.attention.head_count_kv": Typed(ValueType.UINT32, n_head),
        "llama.attention.layer_norm_rms_epsilon": Typed(ValueType.FLOAT32, 1e-5),
        "llama.rope.dimension_count": Typed(ValueType.UINT32, n_embd // n_head),
    }


def tiny_llama_tensors(n_vocab: int, *, n_embd: int = 16, n_ff: int = 32, seed: int | None = None) -> list[TensorSpec]:
    """F32 tensors of a one-block llama. ``seed`` fills a deterministic non-zero pattern (so tensor bytes
    are distinguishable in byte-identity tests); None gives zeros."""

    def t(name: str, *shape: int) -> TensorSpec:
        n = 1
        for d in shape:
            n *= d
        if seed is None:
            data = bytes(4 * n)
        else:
            # a cheap LCG; values kept small so the model stays numerically sane
            x = (seed * 2654435761 + len(name)) & 0xFFFFFFFF
            vals = []
            for _ in range(n):
                x = (1103515245 * x + 12345) & 0x7FFFFFFF
                vals.append(((x >> 8) % 2001 - 1000) / 100000.0)
            data = struct.pack(f"<{n}f", *vals)
        return TensorSpec(name, shape, F32, data)

    return [
        t("token_embd.weight", n_embd, n_vocab),
        t("output_norm.weight", n_embd),
        t("output.weight", n_embd, n_vocab),
        t("blk.0.attn_norm.weight", n_embd),
        t("blk.0.attn_q.weight", n_embd, n_embd),
        t("blk.0.attn_k.weight", n_embd, n_embd),
        t("blk.0.attn_v.weight", n_embd, n_embd),
        t("blk.0.attn_output.weight", n_embd, n_embd),
        t("blk.0.ffn_norm.weight", n_embd),
        t("blk.0.ffn_gate.weight", n_embd, n_ff),
        t("blk.0.ffn_up.weight", n_embd, n_ff),
        t("blk.0.ffn_down.weight", n_ff, n_embd),
    ]


def tokenizer_kv(
    tokens: list[str],
    types: list[int],
    merges: list[str],
    *,
    bos: str | None = None,
    eos: str | None = None,
    eot: str | None = None,
    add_bos: bool = False,
    model: str = "gpt2",
    pre: str = "default",
) -> dict[str, Any]:
    kv: dict[str, Any] = {
        "tokenizer.ggml.model": model,
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": Typed(ValueType.ARRAY, tokens, ValueType.STRING),
        "tokenizer.ggml.token_type": Typed(ValueType.ARRAY, types, ValueType.INT32),
        "tokenizer.ggml.merges": Typed(ValueType.ARRAY, merges, ValueType.STRING),
    }
    for role, text in (("bos", bos), ("eos", eos), ("eot", eot)):
        if text is not None:
            kv[f"tokenizer.ggml.{role}_token_id"] = Typed(ValueType.UINT32, tokens.index(text))
    kv["tokenizer.ggml.add_bos_token"] = Typed(ValueType.BOOL, add_bos)
    kv["tokenizer.ggml.add_eos_token"] = Typed(ValueType.BOOL, False)
    return kv
