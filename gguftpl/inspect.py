"""What `gguftpl inspect` reports about one GGUF header, as plain data."""

from __future__ import annotations

from typing import Any

from gguftpl.gguf.format import FILE_TYPES
from gguftpl.gguf.reader import GGUFHeader
from gguftpl.templates.templateset import TemplateSet, load_templateset

SCHEMA_VERSION = 1


def inspect_header(header: GGUFHeader, label: str | None = None, tset: TemplateSet | None = None) -> dict[str, Any]:
    ts = tset or load_templateset(header)
    ftype = header.get("general.file_type")
    mismatch = ts.list_mismatch
    return {
        "path": label or header.path,
        "gguf_version": header.version,
        "byteorder": "little" if header.byteorder == "<" else "big",
        "file_size": header.file_size,
        "tensor_count": header.tensor_count,
        "kv_count": header.kv_count,
        "data_offset": header.data_offset,
        "alignment": header.alignment,
        "architecture": ts.architecture,
        "file_type": FILE_TYPES.get(ftype, ftype) if isinstance(ftype, int) else None,
        "context_length": ts.context_length,
        "tokenizer": {"model": ts.tokenizer_model, "vocab_size": ts.vocab_size},
        "templates": [
            {"name": t.name, "key": t.key, "sha256": t.sha256, "length": t.length, "lines": t.text.count("\n") + 1}
            for t in ts.templates.values()
        ],
        "template_list": {
            "names": ts.listed_names,
            "agrees": mismatch is None,
            "unlisted": mismatch[0] if mismatch else [],
            "listed_without_key": mismatch[1] if mismatch else [],
        },
        "non_string_templates": ts.non_string_templates,
        "special_tokens": {
            role: {"id": tok.id, "text": tok.text, "type": tok.type_name} for role, tok in ts.special_tokens.items()
        },
        "add_bos": ts.add_bos,
        "add_eos": ts.add_eos,
        "provenance": ts.provenance,
    }
