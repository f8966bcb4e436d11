"""A small GGUF llama.cpp can load in place of the user's model: the user's tokenizer on a zero-weight body.

llama.cpp only serves a model with real tensors (a vocab-only GGUF fails with "tensor 'token_embd.weight'
not found"), but rendering, tokenising and parsing need nothing from the weights. So every ``tokenizer.*``
key of the user's file (vocabulary, merges, special ids, every chat template) is copied onto a one-block
llama whose tensors are F32 zeros stored sparsely ("tokenizer transplant", RESEARCH §5): a 70B GGUF is
checked in seconds, with tens of megabytes of memory, and llama.cpp sees the same prompt, capabilities and
parse result as with the real weights.

A file without a vocabulary gets a byte-level GPT-2 tokenizer (256 byte symbols and one merge, so any text
tokenises) plus the control-shaped markers its templates write, added as CONTROL tokens.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gguftpl.gguf.reader import GGUFHeader, ValueType, read_header
from gguftpl.gguf.writer import TensorSpec, Typed, write_gguf

N_EMBD = 16
"""Smallest width llama.cpp's llama graph accepts with 4 heads; keeps embedding tensors of a 262k-token
vocabulary at 16 MiB each (sparse zeros on disk)."""
N_HEAD = 4
N_FF = 32
CONTEXT_LENGTH = 32768
"""Prompts with many tools and a byte-level vocabulary (one token per byte) need room; the KV cache of a
16-wide single block stays a few MiB."""
STOP_TOKEN = "<|gguftpl_stop|>"
"""Appended (CONTROL) only when the file names no EOS token: the parse check ends generation on EOS."""

_F32 = 0
_TEMPLATE_PREFIX = "tokenizer.chat_template"
_TOKEN_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores")


@dataclass
class StandIn:
    """What was built, for the evidence of ``verify``."""

    path: str
    source: str | None
    vocab: str
    """``transplanted`` (the file's own tokenizer) or ``byte-level`` (the file has none)."""
    n_vocab: int
    added_tokens: list[str] = field(default_factory=list)
    """Tokens the stand-in has that the file does not (byte-level markers, the stop token)."""
    notes: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)
    """Names of the chat templates it carries (``default``, ``tool_use``, ...)."""


def body_kv(context_length: int = CONTEXT_LENGTH) -> dict[str, Any]:
    u32 = ValueType.UINT32
    return {
        "general.architecture": "llama",
        "general.name": "gguftpl stand-in",
        "general.file_type": Typed(u32, 0),
        "llama.context_length": Typed(u32, context_length),
        "llama.embedding_length": Typed(u32, N_EMBD),
        "llama.block_count": Typed(u32, 1),
        "llama.feed_forward_length": Typed(u32, N_FF),
        "llama.attention.head_count": Typed(u32, N_HEAD),
        "llama.attention.head_count_kv": Typed(u32, N_HEAD),
        "llama.attention.layer_norm_rms_epsilon": Typed(ValueType.FLOAT32, 1e-5),
        "llama.rope.dimension_count": Typed(u32, N_EMBD // N_HEAD),
    }


def body_tensors(n_vocab: int) -> list[TensorSpec]:
    """Zero F32 tensors; empty data makes the writer reserve them sparsely (no bytes held in memory)."""
    shapes: list[tuple[str, tuple[int, ...]]] = [
        ("token_embd.weight", (N_EMBD, n_vocab)),
        ("output_norm.weight", (N_EMBD,)),
        ("output.weight", (N_EMBD, n_vocab)),
        ("blk.0.attn_norm.weight", (N_EMBD,)),
        ("blk.0.attn_q.weight", (N_EMBD, N_EMBD)),
        ("blk.0.attn_k.weight", (N_EMBD, N_EMBD)),
        ("blk.0.attn_v.weight", (N_EMBD, N_EMBD)),
        ("blk.0.attn_output.weight", (N_EMBD, N_EMBD)),
        ("blk.0.ffn_norm.weight", (N_EMBD,)),
        ("blk.0.ffn_gate.weight", (N_EMBD, N_FF)),
        ("blk.0.ffn_up.weight", (N_EMBD, N_FF)),
        ("blk.0.ffn_down.weight", (N_FF, N_EMBD)),
    ]
    return [TensorSpec(name, shape, _F32, b"") for name, shape in shapes]


def _is_template_key(key: str) -> bool:
    return key == _TEMPLATE_PREFIX or key.startswith(_TEMPLATE_PREFIX + ".") or key == "tokenizer.chat_templates"


def template_markers(texts: Iterable[str]) -> list[str]:
    """Control-shaped markers (``<|im_start|>``, ``<｜tool▁sep｜>``, ``<|turn>``…) written in template text."""
    from gguftpl.gguf.tokens import control_markers

    return control_markers(texts)


def byte_level_tokenizer(
    markers: Iterable[str], *, eos: str | None = None, bos: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """``tokenizer.*`` keys of a byte-level GPT-2 vocabulary with ``markers`` as CONTROL tokens.

    EOS is ``eos`` if given, else the first marker llama.cpp treats as end of generation, else
    :data:`STOP_TOKEN`; BOS is ``bos`` if given, else EOS (llama.cpp would otherwise pick a byte symbol).
    Returns (keys, tokens added beyond the byte symbols).
    """
    from gguftpl.gguf.tinymodel import byte_level_vocab
    from gguftpl.gguf.tokens import LLAMACPP_EOG_BY_TEXT

    markers = list(dict.fromkeys(markers))
    if eos is None:
        eos = next((m for m in markers if m in LLAMACPP_EOG_BY_TEXT), STOP_TOKEN)
    specials = [*markers, *(t for t in (eos, bos) if t is not None and t not in markers)]
    tokens, types, merges = byte_level_vocab(specials)
    bos_text = bos if bos is not None else eos
    kv: dict[str, Any] = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "default",
        "tokenizer.ggml.tokens": Typed(ValueType.ARRAY, tokens, ValueType.STRING),
        "tokenizer.ggml.token_type": Typed(ValueType.ARRAY, types, ValueType.INT32),
        "tokenizer.ggml.merges": Typed(ValueType.ARRAY, merges, ValueType.STRING),
        "tokenizer.ggml.bos_token_id": Typed(ValueType.UINT32, tokens.index(bos_text)),
        "tokenizer.ggml.eos_token_id": Typed(ValueType.UINT32, tokens.index(eos)),
        "tokenizer.ggml.add_bos_token": Typed(ValueType.BOOL, False),
        "tokenizer.ggml.add_eos_token": Typed(ValueType.BOOL, False),
    }
    return kv, specials


def _copy_tokenizer(header: GGUFHeader) -> dict[str, Any]:
    kv: dict[str, Any] = {}
    for key, item in header.kv.items():
        if key.startswith("tokenizer.") and not _is_template_key(key):
            kv[key] = Typed(item.type, item.decoded(), item.elem_type)
    return kv


def standin_kv(
    header: GGUFHeader | None,
    *,
    templates: Mapping[str, str] | None = None,
    context_length: int = CONTEXT_LENGTH,
    specials: tuple[str, str] | None = None,
) -> tuple[dict[str, Any], StandIn]:
    """Metadata of a stand-in for ``header`` (None: a template-only stand-in). ``templates`` (name -> text,
    ``default`` for ``tokenizer.chat_template``) replaces the file's templates when given; ``specials``
    (bos, eos texts, '' for none) are the BOS and EOS of a byte-level stand-in."""
    src = header.path if header is not None else None
    info = StandIn(path="", source=src, vocab="transplanted", n_vocab=0)
    if templates is None:
        templates = {}
        if header is not None:
            from gguftpl.gguf.templateset import load_templateset

            templates = {n: t.text for n, t in load_templateset(header).templates.items()}
    tok: dict[str, Any] = _copy_tokenizer(header) if header is not None else {}
    tokens_item = tok.get("tokenizer.ggml.tokens")
    model = tok.get("tokenizer.ggml.model")
    model_name = model.value if isinstance(model, Typed) else None
    # tokens that are no array of strings (a UINT32, an INT32 array) are no vocabulary either
    usable = (
        isinstance(tokens_item, Typed)
        and tokens_item.type == ValueType.ARRAY
        and tokens_item.elem_type == ValueType.STRING
        and bool(tokens_item.value)
    )
    if not usable or model_name in (None, "none"):
        bos, eos = specials or ("", "")
        tok, added = byte_level_tokenizer(template_markers(templates.values()), bos=bos or None, eos=eos or None)
        info.vocab = "byte-level"
        info.added_tokens = added
        info.notes.append(
            "the file has no usable vocabulary: byte-level GPT-2 tokens plus the templates' control markers "
            f"({len(added)} added as CONTROL tokens)"
        )
    elif "tokenizer.ggml.eos_token_id" not in tok and isinstance(tokens_item, Typed):
        # generation must end at once in the parse check; without an EOS id nothing would stop it
        tokens = list(tokens_item.value)
        tokens.append(STOP_TOKEN)
        tok["tokenizer.ggml.tokens"] = Typed(ValueType.ARRAY, tokens, ValueType.STRING)
        types = tok.get("tokenizer.ggml.token_type")
        if isinstance(types, Typed):
            tok["tokenizer.ggml.token_type"] = Typed(ValueType.ARRAY, [*types.value, 3], types.elem_type)
        scores = tok.get("tokenizer.ggml.scores")
        if isinstance(scores, Typed):
            tok["tokenizer.ggml.scores"] = Typed(ValueType.ARRAY, [*scores.value, 0.0], scores.elem_type)
        tok["tokenizer.ggml.eos_token_id"] = Typed(ValueType.UINT32, len(tokens) - 1)
        info.added_tokens = [STOP_TOKEN]
        info.notes.append(f"the file names no EOS token: {STOP_TOKEN} appended as EOS so generation stops")
    info.templates = sorted(templates)
    n_vocab = len(tok["tokenizer.ggml.tokens"].value)
    for key in _TOKEN_ARRAYS[1:]:
        arr = tok.get(key)
        if isinstance(arr, Typed) and len(arr.value) != n_vocab:
            # llama.cpp indexes these by token id; a short array would crash the load
            info.notes.append(f"{key} has {len(arr.value)} entries for {n_vocab} tokens: dropped")
            del tok[key]
    info.n_vocab = n_vocab
    kv = body_kv(context_length)
    kv.update(tok)
    if "default" in templates:
        kv["tokenizer.chat_template"] = templates["default"]
    named = sorted(n for n in templates if n != "default")
    for name in named:
        kv[f"{_TEMPLATE_PREFIX}.{name}"] = templates[name]
    if named:
        kv["tokenizer.chat_templates"] = Typed(ValueType.ARRAY, named, ValueType.STRING)
    return kv, info


def build_standin(
    source: str | os.PathLike[str] | GGUFHeader | None,
    out_path: str | os.PathLike[str],
    *,
    templates: Mapping[str, str] | None = None,
    context_length: int = CONTEXT_LENGTH,
    specials: tuple[str, str] | None = None,
) -> StandIn:
    """Write a loadable stand-in for ``source`` (a path or a header already read; None: templates only)
    to ``out_path`` with the project's writer. Raises GGUFFormatError for an unreadable source."""
    header = source if isinstance(source, GGUFHeader) or source is None else read_header(os.fspath(source))
    kv, info = standin_kv(header, templates=templates, context_length=context_length, specials=specials)
    write_gguf(out_path, kv, body_tensors(info.n_vocab))
    info.path = os.fspath(out_path)
    return info
