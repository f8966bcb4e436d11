"""Model references: ``ollama://NAME[:TAG]``, ``lmstudio://PUBLISHER/REPO[/FILE]``, ``hf-cache://ORG/REPO[@REV][/FILE]``.

Parsing only; nothing is read here. Each store's module says where the reference points on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gguftpl.errors import StoreError
from gguftpl.safeio import printable

__all__ = ["SCHEMES", "ModelRef", "is_ref", "parse_ref"]

SCHEMES = {"ollama": "ollama", "lmstudio": "lmstudio", "hf-cache": "hf-cache"}
"""URL scheme -> store name."""


@dataclass(frozen=True)
class ModelRef:
    """A model named in a store, as the user wrote it."""

    store: str
    """``ollama``, ``lmstudio`` or ``hf-cache``."""
    name: str
    """What follows ``SCHEME://``: ``hermes-test:latest``, ``lmstudio-community/Qwen-GGUF/q4.gguf``, …"""

    @property
    def spec(self) -> str:
        return f"{self.store}://{self.name}"


def is_ref(spec: str | os.PathLike[str]) -> bool:
    """True for a string that starts with one of the store schemes (a local path never does)."""
    if not isinstance(spec, str):
        return False
    scheme, sep, _ = spec.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def parse_ref(spec: str) -> ModelRef:
    """The reference in ``spec``; :class:`StoreError` when it is empty or holds path tricks (``..``, a leading
    ``/``, a backslash, a NUL, control characters) that could reach outside the store."""
    scheme, _, name = spec.partition("://")
    store = SCHEMES.get(scheme.lower())
    if store is None:
        raise StoreError(f"not a model reference: {printable(spec)} (use {', '.join(f'{s}://' for s in SCHEMES)})")
    if not name:
        raise StoreError(f"{printable(spec)}: the reference names no model")
    bad = next((c for c in name if c in "\\\0" or ord(c) < 0x20 or ord(c) == 0x7F), None)
    parts = name.split("/")
    if bad is not None or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise StoreError(f"{printable(spec)}: not a valid model name (no empty, '.' or '..' parts, no backslash)")
    return ModelRef(store, name)
