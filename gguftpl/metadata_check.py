"""Metadata keys that llama.cpp reads with a fixed GGUF type, checked against the type the file stores.

llama.cpp's loader (``GGUFMeta``) compares types strictly: ``tokenizer.ggml.eos_token_id`` stored as INT32 or
UINT64, ``{arch}.context_length`` as UINT64, ``tokenizer.ggml.add_bos_token`` as a string all make it refuse
the whole file ("key ... has wrong type i32 but expected type u32", measured with xllamacpp 2026.10.11549).
A chat template key that is not a string is ignored by every runtime, which then falls back to ChatML.
The header reader keeps such values as they are; this module turns them into GT003 findings.
"""

from __future__ import annotations

from typing import Any

from gguftpl.findings import Finding, Location, make_finding
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


def _type_name(vtype: ValueType, elem: ValueType | None) -> str:
    return f"ARRAY of {elem.name}" if vtype == T.ARRAY and elem is not None else vtype.name


def expected_type(key: str, architecture: str | None) -> tuple[ValueType, ValueType | None] | None:
    if key in EXPECTED:
        return EXPECTED[key]
    if key.startswith(_TEMPLATE_PREFIX):
        return (T.STRING, None)
    if architecture and key in {f"{architecture}.{k}" for k in _ARCH_U32}:
        return (T.UINT32, None)
    return None


def wrong_type_findings(header: Any, location_file: str) -> list[Finding]:
    """GT003 for every known key whose stored type is not the one llama.cpp (or a runtime) reads."""
    from gguftpl.rules import METADATA_WRONG_TYPE

    kvs = getattr(header, "kv", None)
    if not isinstance(kvs, dict):
        return []  # not a header at all: the audit reports that (GT002)
    arch_kv = kvs.get("general.architecture")
    arch = arch_kv.value if arch_kv is not None and isinstance(arch_kv.value, str) else None
    out: list[Finding] = []
    for key, kv in kvs.items():
        want = expected_type(key, arch)
        if want is None:
            continue
        vtype, elem = want
        if kv.type == vtype and (vtype != T.ARRAY or kv.elem_type == elem):
            continue
        got = _type_name(kv.type, kv.elem_type)
        if key == "tokenizer.chat_template" or key.startswith(_TEMPLATE_PREFIX):
            effect = "runtimes cannot use it as a chat template and fall back to a built-in one (usually ChatML)"
        elif key == "tokenizer.chat_templates":
            effect = "the list of named templates cannot be read"
        else:
            effect = f"llama.cpp refuses to load the file ('key {key} has wrong type')"
        out.append(
            make_finding(
                METADATA_WRONG_TYPE,
                f"stored as {got}, expected {_type_name(vtype, elem)}: {effect}",
                Location(file=location_file, key=key),
                evidence=f"{key}: {got} = {_preview(kv.value)}",
            )
        )
    return out


def _preview(value: Any) -> str:
    if isinstance(value, (list, str)):
        text = repr(value[:8]) if isinstance(value, list) else repr(value[:80])
    elif hasattr(value, "__len__"):
        text = f"<{len(value)} elements>"
    else:
        text = repr(value)
    return text[:200]


def truncation_findings(header: Any, location_file: str) -> list[Finding]:
    """GT004 when the file is shorter than the end of the tensor data the header describes."""
    from gguftpl.rules import TRUNCATED_TENSOR_DATA

    size = getattr(header, "file_size", None)
    if not isinstance(size, int) or not getattr(header, "tensors", None):
        return []
    end = header.data_end
    if end is None or end <= size:
        return []
    return [
        make_finding(
            TRUNCATED_TENSOR_DATA,
            f"the tensor data should end at byte {end:,} but the file has {size:,} bytes "
            f"({end - size:,} missing): llama.cpp refuses to load it",
            Location(file=location_file),
            evidence=f"{len(header.tensors)} tensors, data section at byte {header.data_offset:,}",
        )
    ]
