"""Metadata keys that llama.cpp reads with a fixed GGUF type (GT003 compares the stored type with these).

llama.cpp's loader (``GGUFMeta``) compares types strictly: ``tokenizer.ggml.eos_token_id`` stored as INT32 or
UINT64, ``{arch}.context_length`` as UINT64, ``tokenizer.ggml.add_bos_token`` as a string all make it refuse
the whole file ("key ... has wrong type i32 but expected type u32", measured with xllamacpp 2026.10.11549).
A chat template key that is not a string is ignored by every runtime, which then falls back to ChatML.
The header reader keeps such values as they are; ``rules/container.py`` turns them into GT003 findings.
"""

from __future__ import annotations

from gguftpl.gguf.reader import ValueType

T = ValueType

_SPECIAL_IDS = (
    "bos",
    "eos",
    "eot",
    "eom",
    "unknown",
    "seperator",  # sic: llama.cpp's key name
    "padding",
    "mask",
    "cls",
    "fim_pre",
    "fim_suf",
    "fim_mid",
    "fim_pad",
    "fim_rep",
    "fim_sep",
)

# key -> (value type, element type for arrays)
EXPECTED: dict[str, tuple[ValueType, ValueType | None]] = {
    "general.architecture": (T.STRING, None),
    "tokenizer.ggml.model": (T.STRING, None),
    "tokenizer.ggml.pre": (T.STRING, None),
    "tokenizer.ggml.tokens": (T.ARRAY, T.STRING),
    "tokenizer.ggml.merges": (T.ARRAY, T.STRING),
    "tokenizer.ggml.token_type": (T.ARRAY, T.INT32),
    "tokenizer.ggml.scores": (T.ARRAY, T.FLOAT32),
    "tokenizer.ggml.add_bos_token": (T.BOOL, None),
    "tokenizer.ggml.add_eos_token": (T.BOOL, None),
    "tokenizer.ggml.add_space_prefix": (T.BOOL, None),
    "tokenizer.chat_template": (T.STRING, None),
    "tokenizer.chat_templates": (T.ARRAY, T.STRING),
    **{f"tokenizer.ggml.{role}_token_id": (T.UINT32, None) for role in _SPECIAL_IDS},
}
_ARCH_U32 = ("context_length", "embedding_length", "block_count")
_TEMPLATE_PREFIX = "tokenizer.chat_template."


def type_name(vtype: ValueType, elem: ValueType | None) -> str:
    return f"ARRAY of {elem.name}" if vtype == T.ARRAY and elem is not None else vtype.name


def expected_type(key: str, architecture: str | None) -> tuple[ValueType, ValueType | None] | None:
    if key in EXPECTED:
        return EXPECTED[key]
    if key.startswith(_TEMPLATE_PREFIX):
        return (T.STRING, None)
    if architecture and key in {f"{architecture}.{k}" for k in _ARCH_U32}:
        return (T.UINT32, None)
    return None
