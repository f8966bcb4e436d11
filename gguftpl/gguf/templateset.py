"""What a GGUF says about chat: its chat templates, special tokens and provenance.

llama.cpp's layout: the default template in ``tokenizer.chat_template``, named ones in
``tokenizer.chat_template.<name>``, and their names in ``tokenizer.chat_templates`` (which llama.cpp never
reads; gguf-py writes it from a set, so its order means nothing). Every ``tokenizer.chat_template.*`` key is
a template whether or not the list names it; disagreement is reported, not trusted.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from gguftpl.gguf.format import PADDING_KEY
from gguftpl.gguf.modelkind import ModelKind, model_kind
from gguftpl.gguf.reader import GGUFHeader, LazyArray, ValueType

DEFAULT_KEY = "tokenizer.chat_template"
NAMED_PREFIX = DEFAULT_KEY + "."
LIST_KEY = "tokenizer.chat_templates"
NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")

TOKEN_TYPES = {1: "NORMAL", 2: "UNKNOWN", 3: "CONTROL", 4: "USER_DEFINED", 5: "UNUSED", 6: "BYTE"}

# role -> metadata key suffix (llama.cpp spells "seperator")
SPECIAL_ROLES = {
    "bos": "bos_token_id",
    "eos": "eos_token_id",
    "eot": "eot_token_id",
    "eom": "eom_token_id",
    "unk": "unknown_token_id",
    "sep": "seperator_token_id",
    "pad": "padding_token_id",
    "mask": "mask_token_id",
    "cls": "cls_token_id",
}

TEMPLATE_TOKEN_NAMES = {
    "unk": "unk_token",
    "sep": "sep_token",
    "pad": "pad_token",
    "cls": "cls_token",
    "mask": "mask_token",
}
"""Roles -> the variable transformers passes each as to a chat template besides ``bos_token``/``eos_token``
(its tokenizer's ``special_tokens_map``). llama.cpp passes only bos and eos."""

PROVENANCE_PREFIXES = (
    "general.name",
    "general.basename",
    "general.source.",
    "general.base_model.",
    "general.finetune",
    "general.organization",
    "general.quantized_by",
    "general.repo_url",
    "general.url",
    "general.version",
    "general.license",
    "gguftpl.",
)


def template_key(name: str) -> str:
    return DEFAULT_KEY if name == "default" else NAMED_PREFIX + name


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    """``default`` for ``tokenizer.chat_template``, else the suffix (``tool_use``, ``rag``…)."""
    key: str
    text: str
    sha256: str
    length: int
    """Length in UTF-8 bytes."""

    @classmethod
    def from_text(cls, name: str, text: str) -> ChatTemplate:
        return cls(name, template_key(name), text, sha256_text(text), len(text.encode("utf-8")))


@dataclass(frozen=True)
class SpecialToken:
    role: str
    id: int
    text: str | None
    """None when the vocabulary is missing or the id is out of range."""
    type: int | None
    type_name: str | None


@dataclass
class TemplateSet:
    path: str
    templates: dict[str, ChatTemplate]
    listed_names: list[str] | None
    """``tokenizer.chat_templates`` as stored, or None when absent."""
    special_tokens: dict[str, SpecialToken]
    add_bos: bool | None
    add_eos: bool | None
    provenance: dict[str, Any]
    architecture: str | None
    context_length: int | None
    tokenizer_model: str | None
    vocab_size: int | None
    non_string_templates: list[str] = field(default_factory=list)
    """Template keys whose value is not a string (reported, never rendered)."""
    kind: ModelKind = field(default_factory=ModelKind)
    """Chat, base (no template), embedding or reranker, from the header (:func:`gguftpl.gguf.modelkind.model_kind`)."""
    _header: GGUFHeader | None = field(default=None, repr=False)
    _tokens: list[str] | None = field(default=None, repr=False)
    _index: dict[str, int] | None = field(default=None, repr=False)
    _types: Any = field(default=None, repr=False)

    @property
    def default(self) -> ChatTemplate | None:
        return self.templates.get("default")

    @property
    def has_vocab(self) -> bool:
        return self.vocab_size is not None and self.vocab_size > 0

    @property
    def list_mismatch(self) -> tuple[list[str], list[str]] | None:
        """(named keys missing from the list, listed names without a key), or None when they agree."""
        if self.listed_names is None:
            return None
        named = {n for n in self.templates if n != "default"}
        listed = set(self.listed_names)
        if named == listed:
            return None
        return sorted(named - listed), sorted(listed - named)

    def tokens(self) -> list[str]:
        if self._tokens is None:
            kv = _string_array(self._header, "tokenizer.ggml.tokens") if self._header is not None else None
            raw = kv.decoded() if kv is not None else None
            # the decoded list is cached by the lazy array; share it rather than copy 262k strings
            self._tokens = raw if isinstance(raw, list) else []
        return self._tokens

    def _lazy_tokens(self) -> LazyArray | None:
        """The vocabulary as the reader left it (undecoded), when it is a string array not decoded yet."""
        if self._tokens is not None or self._header is None:
            return None
        kv = _string_array(self._header, "tokenizer.ggml.tokens")
        return kv.value if kv is not None and isinstance(kv.value, LazyArray) else None

    def invalid_token_utf8(self) -> int | None:
        """The file offset of the first byte that leaves a token invalid UTF-8 (None: every token is valid).
        Lookups decode single tokens only, so a bad one nothing looks up is found here or nowhere."""
        lazy = self._lazy_tokens()
        return lazy.first_invalid_utf8() if lazy is not None else None

    def token_id(self, text: str) -> int | None:
        """Exact vocabulary lookup (the first id with that text)."""
        lazy = self._lazy_tokens()
        if lazy is not None and self._index is None:
            return lazy.find_string(text)  # one search of the raw bytes, not 262k strings decoded
        if self._index is None:
            index: dict[str, int] = {}
            for i, t in enumerate(self.tokens()):
                index.setdefault(t, i)
            self._index = index
        return self._index.get(text)

    def token_text(self, token_id: int) -> str | None:
        lazy = self._lazy_tokens()
        if lazy is not None:
            return str(lazy.item(token_id)) if 0 <= token_id < len(lazy) else None
        toks = self.tokens()
        return toks[token_id] if 0 <= token_id < len(toks) else None

    def token_type(self, token_id: int) -> int | None:
        if self._types is None:
            kv = self._header.kv.get("tokenizer.ggml.token_type") if self._header is not None else None
            if kv is None or kv.type != ValueType.ARRAY or kv.elem_type not in _INT_TYPES:
                self._types = []  # absent or wrongly typed (GT003): no token types
            elif isinstance(kv.value, LazyArray):
                lazy = kv.value
                return int(lazy.item(token_id)) if 0 <= token_id < len(lazy) else None
            else:
                self._types = list(kv.value) if isinstance(kv.value, list) else []
        types = self._types
        return int(types[token_id]) if 0 <= token_id < len(types) else None


def load_templateset(header: GGUFHeader) -> TemplateSet:
    templates: dict[str, ChatTemplate] = {}
    non_string: list[str] = []
    named: dict[str, ChatTemplate] = {}
    for key, kv in header.kv.items():
        if key == DEFAULT_KEY:
            name = "default"
        elif key.startswith(NAMED_PREFIX):
            name = key[len(NAMED_PREFIX) :]
        else:
            continue
        value = kv.decoded()
        if not isinstance(value, str):
            non_string.append(key)
            continue
        tpl = ChatTemplate(name, key, value, sha256_text(value), len(value.encode("utf-8")))
        if name == "default":
            templates["default"] = tpl
        else:
            named[name] = tpl
    for name in sorted(named):
        templates[name] = named[name]

    listed = header.get(LIST_KEY)
    listed_names = [str(x) for x in listed] if isinstance(listed, list) else None

    arch = header.get("general.architecture")
    arch = arch if isinstance(arch, str) else None
    ctx = header.get(f"{arch}.context_length") if arch else None
    tok_kv = _string_array(header, "tokenizer.ggml.tokens")
    vocab_size = len(tok_kv.value) if tok_kv is not None and hasattr(tok_kv.value, "__len__") else None
    tmodel = header.get("tokenizer.ggml.model")

    ts = TemplateSet(
        path=header.path,
        templates=templates,
        listed_names=listed_names,
        special_tokens={},
        add_bos=_bool_or_none(header.get("tokenizer.ggml.add_bos_token")),
        add_eos=_bool_or_none(header.get("tokenizer.ggml.add_eos_token")),
        provenance={k: header.get(k) for k in header.kv if k.startswith(PROVENANCE_PREFIXES) and k != PADDING_KEY},
        architecture=arch,
        context_length=int(ctx) if isinstance(ctx, int) else None,
        tokenizer_model=tmodel if isinstance(tmodel, str) else None,
        vocab_size=vocab_size,
        non_string_templates=non_string,
        kind=model_kind(header, bool(templates)),
        _header=header,
    )
    for role, suffix in SPECIAL_ROLES.items():
        v = header.get("tokenizer.ggml." + suffix)
        if isinstance(v, bool) or not isinstance(v, int):
            continue
        text = ts.token_text(v) if ts.has_vocab else None
        ttype = ts.token_type(v) if ts.has_vocab else None
        ts.special_tokens[role] = SpecialToken(role, v, text, ttype, TOKEN_TYPES.get(ttype) if ttype else None)
    return ts


_INT_TYPES = (
    ValueType.INT8,
    ValueType.UINT8,
    ValueType.INT16,
    ValueType.UINT16,
    ValueType.INT32,
    ValueType.UINT32,
    ValueType.INT64,
    ValueType.UINT64,
)


def _string_array(header: GGUFHeader, key: str) -> Any:
    """The KV of ``key`` when it is an array of strings; a wrongly typed one (GT003) is no vocabulary."""
    kv = header.kv.get(key)
    return kv if kv is not None and kv.type == ValueType.ARRAY and kv.elem_type == ValueType.STRING else None


def _bool_or_none(v: Any) -> bool | None:
    return bool(v) if isinstance(v, (bool, int)) else None


def special_token_text(ts: TemplateSet, role: str) -> str:
    tok = ts.special_tokens.get(role)
    return tok.text or "" if tok else ""


def template_special_tokens(ts: TemplateSet) -> dict[str, str]:
    """The special tokens other than bos/eos that transformers passes to the chat template (``sep_token`` …),
    read from the file's ``tokenizer.ggml.*_token_id`` keys: the converter writes them from the same
    tokenizer_config transformers reads."""
    out = {}
    for role, name in TEMPLATE_TOKEN_NAMES.items():
        text = special_token_text(ts, role)
        if text:
            out[name] = text
    return out
