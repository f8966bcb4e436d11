"""What an upstream (Hugging Face) repo says about chat: its templates and special tokens.

The same parsing serves a Hub download, a local folder and a bundled catalog entry, so a GGUF compared
against any of them sees the same names and texts. Templates are read in llama.cpp's converter priority
(gguf-py ``SpecialVocab._try_load_from_tokenizer_json``):

1. ``tokenizer_config.json`` ``chat_template`` — a string, or a list of ``{name, template}``;
2. otherwise ``chat_template.jinja``, plus ``additional_chat_templates/*.jinja`` as named templates;
3. otherwise ``chat_template.json`` ``chat_template``.

Names are sanitised the way ``GGUFWriter.add_chat_template`` does (``[A-Za-z0-9_]``) so they line up with
``tokenizer.chat_template.<name>`` keys. Texts are compared after JSON decoding, never as raw JSON.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gguftpl import limits
from gguftpl.errors import HubError

# Files the comparison needs; patterns as huggingface_hub allow_patterns understands them.
TEMPLATE_FILES = [
    "tokenizer_config.json",
    "chat_template.jinja",
    "additional_chat_templates/*.jinja",
    "chat_template.json",
]
SPECIAL_FILES = ["generation_config.json", "special_tokens_map.json"]
TOKENIZER_JSON = "tokenizer.json"  # big (MBs): fetched only when tokenizer_config has no added tokens


def file_bound(name: str) -> int:
    """The largest upstream file of this name read (``tokenizer.json`` is allowed more)."""
    return limits.MAX_UPSTREAM_TOKENIZER_BYTES if name == TOKENIZER_JSON else limits.MAX_UPSTREAM_CONFIG_BYTES


_NAME_CHARS = set(string.ascii_letters + string.digits)


def sanitize_template_name(name: str) -> str:
    """The GGUF key suffix gguf-py would write for a template name."""
    return "".join(c if c in _NAME_CHARS else "_" for c in name)


@dataclass
class UpstreamSpecial:
    bos: str | None = None
    """BOS token text (``bos_token`` in tokenizer_config / special_tokens_map)."""
    eos: str | None = None
    added_tokens: dict[int, dict[str, Any]] = field(default_factory=dict)
    """id -> {"content": str, "special": bool} from ``added_tokens_decoder`` or tokenizer.json."""
    generation_eos_ids: list[int] = field(default_factory=list)
    """``eos_token_id`` of generation_config.json (int or list), the ids a runtime should stop on."""
    pad: str | None = None
    unk: str | None = None
    add_bos: bool | None = None
    add_eos: bool | None = None
    added_tokens_source: str | None = None
    """File the added tokens came from, None if no source had them."""

    def id_of(self, text: str | None) -> int | None:
        if text is None:
            return None
        for tid, tok in self.added_tokens.items():
            if tok.get("content") == text:
                return tid
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "bos": self.bos,
            "eos": self.eos,
            "pad": self.pad,
            "unk": self.unk,
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
            "added_tokens": {str(k): v for k, v in sorted(self.added_tokens.items())},
            "added_tokens_source": self.added_tokens_source,
            "generation_eos_ids": self.generation_eos_ids,
        }


@dataclass
class UpstreamConfig:
    repo_id: str | None
    revision_requested: str | None
    commit_sha: str | None
    """The commit the files were read at (always reported); None for a local folder."""
    templates: dict[str, str]
    """name -> template text, ``default`` first; a plain-string ``chat_template`` is ``default``."""
    special: UpstreamSpecial
    sources: dict[str, str]
    """template name -> file it came from (``tokenizer_config.json``, ``chat_template.jinja``, …)."""
    origin: str = "hub"
    """hub | cache (offline) | dir | json | catalog"""
    location: str = ""
    """Endpoint URL, folder or file the data came from."""
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Files that were read."""
    original_names: dict[str, str] = field(default_factory=dict)
    """sanitised name -> name as written upstream, where they differ."""
    complete: bool = True
    """False when the source may hold more templates than listed (a partial catalog entry)."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Catalog only: template name -> EXACT | CORROBORATED | PROXY (``catalog.PROVEN`` says what each proves)."""

    @property
    def label(self) -> str:
        rev = self.commit_sha or self.revision_requested
        base = self.repo_id or self.location
        return f"{base}@{rev}" if rev else base

    def to_dict(self) -> dict[str, Any]:
        import hashlib

        return {
            "repo_id": self.repo_id,
            "revision_requested": self.revision_requested,
            "commit_sha": self.commit_sha,
            "origin": self.origin,
            "location": self.location,
            "complete": self.complete,
            "templates": {
                n: {
                    "sha256": hashlib.sha256(t.encode("utf-8")).hexdigest(),
                    "length": len(t.encode("utf-8")),
                    "source": self.sources.get(n),
                }
                for n, t in self.templates.items()
            },
            "special": self.special.to_dict(),
            "warnings": self.warnings,
        }


def _json_file(raw: bytes, name: str) -> Any:
    from gguftpl.safeio import loads_json

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HubError(f"{name} is not valid JSON: {exc}") from None
    # deep nesting, huge ints and lone surrogates are one-line errors too
    return loads_json(text, what=name, error=HubError, invalid="is not valid JSON")


def _token_text(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("content"), str):
        return str(entry["content"])
    return None


def parse_upstream_files(
    read: Callable[[str], bytes | None], listing: list[str]
) -> tuple[dict[str, str], dict[str, str], dict[str, str], UpstreamSpecial, list[str]]:
    """Templates, sources, original names, special tokens and warnings from upstream files.

    ``read(name)`` returns a file's bytes or None when it does not exist; ``listing`` lists the files
    that exist (needed for ``additional_chat_templates/*.jinja``).
    """
    warnings: list[str] = []
    raw_tc = read("tokenizer_config.json")
    tc: dict[str, Any] = {}
    if raw_tc is not None:
        obj = _json_file(raw_tc, "tokenizer_config.json")
        if not isinstance(obj, dict):
            raise HubError("tokenizer_config.json is not a JSON object")
        tc = obj

    chosen: Any = None
    chosen_src = ""
    if tc.get("chat_template") is not None:
        chosen, chosen_src = tc["chat_template"], "tokenizer_config.json"
    else:
        raw_jinja = read("chat_template.jinja")
        if raw_jinja is not None:
            chosen, chosen_src = _text(raw_jinja, "chat_template.jinja"), "chat_template.jinja"
            extra = sorted(
                f
                for f in listing
                if f.startswith("additional_chat_templates/") and f.endswith(".jinja") and f.count("/") == 1
            )
            if extra:
                items: list[dict[str, str]] = [{"name": "default", "template": chosen}]
                for f in extra:
                    raw = read(f)
                    if raw is None:
                        warnings.append(f"{f} is listed but could not be read")
                        continue
                    items.append({"name": f.rsplit("/", 1)[1][: -len(".jinja")], "template": _text(raw, f)})
                chosen = items
        else:
            raw_ctj = read("chat_template.json")
            if raw_ctj is not None:
                obj = _json_file(raw_ctj, "chat_template.json")
                if isinstance(obj, dict) and obj.get("chat_template") is not None:
                    chosen, chosen_src = obj["chat_template"], "chat_template.json"

    templates: dict[str, str] = {}
    sources: dict[str, str] = {}
    original: dict[str, str] = {}
    if isinstance(chosen, str):
        templates["default"] = chosen
        sources["default"] = chosen_src
    elif isinstance(chosen, list):
        named: dict[str, str] = {}
        for i, item in enumerate(chosen):
            if not isinstance(item, dict) or not isinstance(item.get("template"), str):
                warnings.append(f"{chosen_src}: chat_template entry {i} has no template string; ignored")
                continue
            raw_name = str(item.get("name", ""))
            name = sanitize_template_name(raw_name)
            if not name:
                warnings.append(f"{chosen_src}: chat_template entry {i} has no name; ignored (as llama.cpp does)")
                continue
            if name in named:
                warnings.append(f"{chosen_src}: template name {name!r} appears twice; the last one wins")
            named[name] = item["template"]
            if name != raw_name:
                original[name] = raw_name
            src = chosen_src
            if chosen_src == "chat_template.jinja" and name != "default":
                src = f"additional_chat_templates/{raw_name}.jinja"
            sources[name] = src
        if "default" in named:
            templates["default"] = named.pop("default")
        templates.update(named)
    elif chosen is not None:
        warnings.append(f"{chosen_src}: chat_template has an unexpected type {type(chosen).__name__}; ignored")

    special = _parse_special(tc, read, warnings)
    return templates, sources, original, special, warnings


def _text(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HubError(f"{name} is not valid UTF-8: {exc.reason}") from None


def _parse_special(tc: dict[str, Any], read: Callable[[str], bytes | None], warnings: list[str]) -> UpstreamSpecial:
    sp = UpstreamSpecial()
    stm: dict[str, Any] = {}
    raw = read("special_tokens_map.json")
    if raw is not None:
        try:
            obj = _json_file(raw, "special_tokens_map.json")
            stm = obj if isinstance(obj, dict) else {}
        except HubError as exc:
            warnings.append(str(exc))
    sp.bos = _token_text(tc.get("bos_token")) or _token_text(stm.get("bos_token"))
    sp.eos = _token_text(tc.get("eos_token")) or _token_text(stm.get("eos_token"))
    sp.pad = _token_text(tc.get("pad_token")) or _token_text(stm.get("pad_token"))
    sp.unk = _token_text(tc.get("unk_token")) or _token_text(stm.get("unk_token"))
    if isinstance(tc.get("add_bos_token"), bool):
        sp.add_bos = tc["add_bos_token"]
    if isinstance(tc.get("add_eos_token"), bool):
        sp.add_eos = tc["add_eos_token"]

    atd = tc.get("added_tokens_decoder")
    if isinstance(atd, dict) and atd:
        for k, v in atd.items():
            try:
                tid = int(k)
            except ValueError:
                continue
            if isinstance(v, dict) and isinstance(v.get("content"), str):
                sp.added_tokens[tid] = {"content": v["content"], "special": bool(v.get("special", False))}
        sp.added_tokens_source = "tokenizer_config.json"
    else:
        raw_tj = read(TOKENIZER_JSON)
        if raw_tj is not None:
            try:
                for v in added_tokens_json(raw_tj):
                    if isinstance(v, dict) and isinstance(v.get("id"), int) and isinstance(v.get("content"), str):
                        sp.added_tokens[v["id"]] = {"content": v["content"], "special": bool(v.get("special"))}
                sp.added_tokens_source = TOKENIZER_JSON
            except HubError as exc:
                warnings.append(str(exc))

    raw_gc = read("generation_config.json")
    if raw_gc is not None:
        try:
            gc = _json_file(raw_gc, "generation_config.json")
            eos = gc.get("eos_token_id") if isinstance(gc, dict) else None
            if isinstance(eos, int):
                sp.generation_eos_ids = [eos]
            elif isinstance(eos, list):
                sp.generation_eos_ids = [int(x) for x in eos if isinstance(x, int)]
        except HubError as exc:
            warnings.append(str(exc))
    return sp


_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')


def added_tokens_json(raw: bytes) -> list[Any]:
    """The top-level ``added_tokens`` array of a ``tokenizer.json``, decoding nothing else: the vocabulary
    and merges around it are most of the file (a 35 MB file decoded whole costs hundreds of MB). Strings and
    brackets are scanned to find the key at depth 1; a file without it has no added tokens."""
    from gguftpl.safeio import check_encodable

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HubError(f"{TOKENIZER_JSON} is not valid JSON: {exc}") from None
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok in "{[":
            depth += 1
        elif tok in "}]":
            depth -= 1
        elif depth == 1 and tok == '"added_tokens"':
            colon = _COLON.match(text, m.end())
            if colon is None:
                break
            try:
                value, _ = json.JSONDecoder().raw_decode(text, colon.end())
            except (ValueError, RecursionError) as exc:
                raise HubError(f"{TOKENIZER_JSON} is not valid JSON: {exc}") from None
            check_encodable(value, what=TOKENIZER_JSON, error=HubError)
            return value if isinstance(value, list) else []
    return []


_COLON = re.compile(r"\s*:\s*")
