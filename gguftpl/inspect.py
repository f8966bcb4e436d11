"""What `gguftpl inspect` reports about one GGUF header: as plain data, and as text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gguftpl.errors import UsageError
from gguftpl.gguf.format import FILE_TYPES
from gguftpl.gguf.reader import GGUFHeader
from gguftpl.gguf.templateset import TemplateSet, load_templateset
from gguftpl.safeio import printable

SCHEMA_VERSION = 1

Style = Callable[..., str]
"""``style(text, bold=True)`` / ``style(text, fg="yellow")``: how the caller highlights (``click.style`` on
a terminal); plain text by default."""


def _plain(text: str, **_: Any) -> str:
    return text


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


def inspect_file(spec: str, template: str | None = None) -> tuple[dict[str, Any], TemplateSet]:
    """(the report, the template set) of a local GGUF or a ``hf://``/``https://`` URL (header only; a remote
    read reports what it cost under ``"remote"``, a later local shard which shard was read under ``"split"``).
    With ``template``, only that template is reported, and a file without it is a ``UsageError``."""
    from gguftpl.gguf.hubref import is_remote
    from gguftpl.gguf.open import open_header

    header, label, extra = open_header(spec)
    ts = load_templateset(header)
    if template and template not in ts.templates:
        have = ", ".join(ts.templates) or "none"
        raise UsageError(f"{label} has no template named {template!r} (has: {have})")
    info = inspect_header(header, label, ts)
    if extra:
        info["remote" if is_remote(spec) else "split"] = extra
    if template:
        info["templates"] = [t for t in info["templates"] if t["name"] == template]
    return info, ts


def inspect_text(info: dict[str, Any], ts: TemplateSet, only: str | None = None, style: Style = _plain) -> str:
    """The text report of one file: header facts, each template (its head, or all of ``only``), special
    tokens, provenance."""
    lines = [style(printable(info["path"]), bold=True)]
    lines.append(
        f"  GGUF v{info['gguf_version']} ({info['byteorder']} endian), arch {printable(info['architecture'] or '?')}, "
        f"{printable(str(info['file_type'] or 'file type ?'))}, {info['tensor_count']} tensors, "
        f"data at byte {info['data_offset']} (alignment {info['alignment']})"
    )
    tok = info["tokenizer"]
    lines.append(
        f"  tokenizer: {printable(str(tok['model'] or '?'))}, {tok['vocab_size'] or 0} tokens, "
        f"context {info['context_length']}"
    )
    if not info["templates"]:
        lines.append(style("  no chat template", fg="yellow"))
    for t in info["templates"]:
        lines.append(
            f"  template {printable(t['name'])} ({printable(t['key'])}): {t['length']} bytes, {t['lines']} lines, "
            f"sha256 {t['sha256']}"
        )
        status = info["provenance"].get(f"gguftpl.patch.template.{t['name']}.status")
        if isinstance(status, str):
            from gguftpl.upstream.catalog import proven

            lines.append(f"    written by gguftpl patch from the bundled catalog: {printable(proven(status))}")
        text = ts.templates[t["name"]].text
        head = text.splitlines()[:3] if only is None else text.splitlines()
        for ln in head:
            lines.append("    | " + printable(ln if len(ln) <= 110 else ln[:107] + "..."))
        if only is None and text.count("\n") >= 3:
            lines.append("    | …")
    tl = info["template_list"]
    if tl["names"] is not None and not tl["agrees"]:
        lines.append(
            style(
                f"  tokenizer.chat_templates disagrees with the keys: unlisted {tl['unlisted']}, "
                f"listed without a key {tl['listed_without_key']}",
                fg="yellow",
            )
        )
    if info["special_tokens"]:
        parts = [f"{r}={v['id']} {v['text']!r} {v['type'] or ''}".rstrip() for r, v in info["special_tokens"].items()]
        lines.append("  special tokens: " + printable(", ".join(parts)))
    lines.append(f"  add_bos={info['add_bos']} add_eos={info['add_eos']}")
    for k, v in info["provenance"].items():
        lines.append(f"  {printable(k)} = {printable(str(v))}")
    for note in (info.get("remote") or info.get("split") or {}).get("notes", []):
        lines.append(style(f"  note: {printable(note)}", fg="yellow"))
    return "\n".join(lines)
