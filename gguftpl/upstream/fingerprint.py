"""Which model family a GGUF's tokenizer comes from, whatever its name and templates say.

A converter or a quantizer replaces templates and names; the vocabulary stays. A fingerprint has four parts:

- ``model`` and ``pre``: ``tokenizer.ggml.model`` and ``tokenizer.ggml.pre`` (how llama.cpp tokenizes);
- ``vocab``: count and sha256 of the learned tokens (the texts, in id order, of every token that is not
  CONTROL, USER_DEFINED or UNUSED);
- ``merges``: count and sha256 of ``tokenizer.ggml.merges`` as stored (BPE; empty for SentencePiece);
- ``added``: count and sha256 of the added tokens (CONTROL and USER_DEFINED, id and text), padding left out.

Padding is left out because sizes of one family pad the vocabulary differently (Qwen2.5-0.5B has 151,936
entries, Qwen2.5-7B 152,064) and converters mark it UNUSED or USER_DEFINED (``[PAD151646]``). Token types are
not hashed: converters disagree on them. Vocabulary and merges give the lineage (Qwen1.5 to Qwen3 share them);
the added tokens tell releases apart (Qwen2.5 added ``<tool_call>``, Qwen3 ``<think>``), so only a match of all
parts names a family. The known families live beside the catalog, in ``upstream_templates/tokenizers.json``,
each with the file it was measured on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from gguftpl.errors import GGUFTplError, HubError

TOKENIZERS_FILE = "tokenizers.json"
_ADDED_TYPES = (3, 4)  # CONTROL, USER_DEFINED
_UNUSED = 5
_PADDING = re.compile(r"^\[PAD\d+\]$|^<\|?(?:pad|PAD)_?\d+\|?>$")


@dataclass(frozen=True)
class Part:
    count: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Part:
        return cls(int(d["count"]), str(d["sha256"]))


@dataclass(frozen=True)
class Fingerprint:
    model: str | None
    pre: str | None
    vocab: Part
    merges: Part
    added: Part

    def lineage(self) -> tuple[Any, ...]:
        """What a family shares across its releases: tokenizer model, learned tokens, merges."""
        return self.model, self.vocab, self.merges

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "pre": self.pre,
            "vocab": self.vocab.to_dict(),
            "merges": self.merges.to_dict(),
            "added": self.added.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Fingerprint:
        parts = {k: Part.from_dict(d[k]) for k in ("vocab", "merges", "added")}
        return cls(d.get("model"), d.get("pre"), **parts)


def _hash_added(items: Sequence[tuple[int, str]]) -> Part:
    data = "".join(f"{i} {len(text)} {text}" for i, text in items).encode("utf-8", "surrogatepass")
    return Part(len(items), hashlib.sha256(data).hexdigest())


def _hash_vocab(tokens: list[str], skip: Sequence[int]) -> Part:
    """The learned tokens in id order, joined at C speed (an audit fingerprints every file whose tokenizer
    model some family shares): slices between the few skipped ids, NUL-separated."""
    from gguftpl.gguf.lazyarray import without_ids

    learned = without_ids(tokens, skip)
    data = "\x00".join(learned).encode("utf-8", "surrogatepass")
    return Part(len(learned), hashlib.sha256(data).hexdigest())


def _hash_vocab_bytes(tokens: Any, skip: Sequence[int]) -> Part:
    """``_hash_vocab`` over the stored bytes of a lazy vocabulary (``LazyArray.joined_except``): the same bytes, so
    the same digest; a token that is not valid UTF-8 raises GGUFFormatError, as decoding it does."""
    count, data = tokens.joined_except(skip)
    return Part(count, hashlib.sha256(data).hexdigest())


_MEMO_SIZE = 8
_MEMO: dict[bytes, Fingerprint | None] = {}
"""Fingerprints by the stored bytes they are computed from (``_stored_key``): the last few vocabularies."""


def fingerprint(tset: Any) -> Fingerprint | None:
    """The fingerprint of a :class:`~gguftpl.gguf.templateset.TemplateSet`'s tokenizer; None without a
    vocabulary (or with one that cannot be read). A pure function of the stored vocabulary arrays and the
    model/pre keys: computed once per process for the quants of one conversion and for one file before and
    after a patch (which never touches the vocabulary), keyed by a hash of those stored bytes."""
    header = getattr(tset, "_header", None)
    if header is None or not getattr(tset, "has_vocab", False):
        return None
    key = _stored_key(header)
    if key is not None and key in _MEMO:
        return _MEMO[key]
    found = _fingerprint(tset, header)
    if key is not None:
        _MEMO[key] = found
        while len(_MEMO) > _MEMO_SIZE:
            del _MEMO[next(iter(_MEMO))]
    return found


def _stored_key(header: Any) -> bytes | None:
    """sha256 over the stored bytes of the tokens, token types and merges and the model/pre values; None
    when the tokens are not a stored (lazy) array, whose fingerprint is cheap anyway."""
    h = hashlib.sha256(f"byteorder={getattr(header, 'byteorder', '')}\n".encode())
    for name in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"):
        value: Any = getattr(header.kv.get(name), "value", None)
        if hasattr(value, "raw"):
            try:
                raw = value.raw()
            except (GGUFTplError, OSError):
                return None
            h.update(f"{name}:{value.elem_type}:{len(value)}:".encode() + hashlib.sha256(raw).digest())
        elif name == "tokenizer.ggml.tokens":
            return None
        else:
            h.update(f"{name}={value!r}".encode("utf-8", "surrogatepass"))
    for name in ("tokenizer.ggml.model", "tokenizer.ggml.pre"):
        h.update(f"{name}={header.get(name)!r}\n".encode("utf-8", "surrogatepass"))
    return h.digest()


def _fingerprint(tset: Any, header: Any) -> Fingerprint | None:
    try:
        raw = _raw_vocab(header)
        vocab: Part | None = None
        if raw is not None:
            tokens: Sequence[Any] = raw
            skip, added_at = _skip_ids_raw(header, len(tokens))
            vocab = _hash_vocab_bytes(header.kv["tokenizer.ggml.tokens"].value, skip)
        else:
            tokens = tset.tokens()
            skip, added_at = _skip_ids(_token_types(header), len(tokens))
        merges_kv = header.kv.get("tokenizer.ggml.merges")
        merges = _merges_part(merges_kv)
    except (GGUFTplError, ValueError, TypeError):
        return None
    texts = [tokens[i] if isinstance(tokens[i], str) else tokens[i].decode("utf-8") for i in added_at]
    added = [(i, t) for i, t in zip(added_at, texts, strict=True) if not _PADDING.match(t)]
    model, pre = header.get("tokenizer.ggml.model"), header.get("tokenizer.ggml.pre")
    return Fingerprint(
        model if isinstance(model, str) else None,
        pre if isinstance(pre, str) else None,
        vocab if vocab is not None else _hash_vocab(cast("list[str]", tokens), skip),
        merges,
        _hash_added(added),
    )


def _raw_vocab(header: Any) -> list[bytes] | None:
    """The vocabulary's tokens as stored, undecoded (``LazyArray.element_bytes``: a fifth of the time of decoding
    262k tokens), when the reader left it undecoded; None where the decoded tokens are to be used."""
    kv = header.kv.get("tokenizer.ggml.tokens")
    value: Any = getattr(kv, "value", None)
    if getattr(value, "_cache", True) is not None or not hasattr(value, "element_bytes"):
        return None  # decoded already (or not a lazy array): the decoded list costs nothing more
    elements: list[bytes] | None = value.element_bytes()
    return elements


def _skip_ids(types: Sequence[Any], n_tokens: int) -> tuple[list[int], list[int]]:
    """(ids left out of the learned tokens, of those the added ones: CONTROL and USER_DEFINED) from the types."""
    if len(types) != n_tokens:
        types = []  # no (or a broken) type list: every token counts as learned
    # NORMAL, BYTE and UNKNOWN tokens are learned; the few others are added tokens, padding or unused
    skip = [i for i, kind in enumerate(types) if kind in (*_ADDED_TYPES, _UNUSED)]
    return skip, [i for i in skip if types[i] in _ADDED_TYPES]


def _skip_ids_raw(header: Any, n_tokens: int) -> tuple[list[int], list[int]]:
    """``_skip_ids`` over a 4-byte integer type array as stored: the few ids whose type is 3, 4 or 5 found by one
    search of its bytes, not 262k integers decoded and tested in Python."""
    kv = header.kv.get("tokenizer.ggml.token_type")
    value: Any = getattr(kv, "value", None)
    fmt = getattr(getattr(value, "elem_type", None), "name", "")
    if fmt not in ("INT32", "UINT32") or getattr(value, "_cache", None) is not None or not hasattr(value, "raw"):
        return _skip_ids(_token_types(header), n_tokens)
    if len(value) != n_tokens:
        return [], []
    wanted = bytes((*_ADDED_TYPES, _UNUSED))
    # non-overlapping matches hide no aligned one: a match's last three bytes are zeros, none of the types sought
    pattern = b"[" + re.escape(wanted) + b"]\x00\x00\x00"
    if value.byteorder == ">":
        pattern = b"\x00\x00\x00[" + re.escape(wanted) + b"]"
    data = value.raw()
    skip, added = [], []
    for m in re.finditer(pattern, data):
        at = m.start()
        if at % 4 == 0:
            i = at // 4
            skip.append(i)
            if data[at + (3 if value.byteorder == ">" else 0)] in _ADDED_TYPES:
                added.append(i)
    return skip, added


def _token_types(header: Any) -> list[Any]:
    kv = header.kv.get("tokenizer.ggml.token_type")
    value: Any = getattr(kv, "value", None)
    if hasattr(value, "decode"):  # a LazyArray: decoded once, cached on it (the template set reads it too)
        value = value.decode()
    return value if isinstance(value, list) else []


def _merges_part(kv: Any) -> Part:
    if kv is None:
        return Part(0, hashlib.sha256(b"").hexdigest())
    value = kv.value
    if hasattr(value, "raw"):  # a LazyArray: hash the stored bytes, no decoding
        return Part(len(value), hashlib.sha256(value.raw()).hexdigest())
    items = [str(x) for x in value] if isinstance(value, list) else []
    return _hash_vocab(items, ())


@dataclass(frozen=True)
class TokenizerFamily:
    """A model family recognised by its tokenizer, and where that fingerprint was measured."""

    family: str
    fingerprint: Fingerprint
    provenance: dict[str, Any] = field(default_factory=dict)
    """``measured_on`` (file and sha256), ``source`` (where that file comes from), ``converted_from`` (repo)."""
    note: str = ""


def load_families(root: Path) -> list[TokenizerFamily]:
    """``tokenizers.json`` beside the catalog's index (absent: no families)."""
    path = root / TOKENIZERS_FILE
    if not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return [
            TokenizerFamily(
                f["family"], Fingerprint.from_dict(f["fingerprint"]), dict(f.get("provenance") or {}), f.get("note", "")
            )
            for f in doc["families"]
        ]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise HubError(f"catalog tokenizers {path} cannot be read: {exc!r}") from None


def could_match(tset: Any, families: Sequence[TokenizerFamily]) -> bool:
    """Cheap: some family has this tokenizer model and no more learned tokens than the file has entries. Saves
    reading merges and hashing a vocabulary that cannot match (an audit asks for every file)."""
    size = getattr(tset, "vocab_size", None) or 0
    model = getattr(tset, "tokenizer_model", None)
    return any(f.fingerprint.model == model and f.fingerprint.vocab.count <= size for f in families)


def match_family(fp: Fingerprint | None, families: Sequence[TokenizerFamily]) -> tuple[TokenizerFamily | None, str]:
    """(family, how) when every part matches; else (None, what came closest)."""
    if fp is None:
        return None, "no vocabulary to fingerprint"
    for fam in families:
        want = fam.fingerprint
        # a missing pre-tokenizer is an old converter; a different one tokenizes differently
        if want.lineage() == fp.lineage() and want.added == fp.added and fp.pre in (want.pre, None):
            pre = "" if want.pre == fp.pre else f" (no pre-tokenizer name here, {want.pre!r} in the family)"
            return fam, f"matched by tokenizer: {fam.family}{pre}"
    kin = [f.family for f in families if f.fingerprint.lineage() == fp.lineage()]
    if kin:
        return None, (
            f"the tokenizer shares its vocabulary and merges with {', '.join(kin)} but not its added tokens or "
            f"pre-tokenizer ({fp.added.count} added tokens, pre {fp.pre!r} here): another release, not matched"
        )
    return None, "the tokenizer matches no known family"
