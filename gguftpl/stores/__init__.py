"""The models a user already has, in the stores of the runtimes that pulled them.

``ollama://NAME[:TAG]`` (:mod:`.ollama`), ``lmstudio://PUBLISHER/REPO[/FILE]`` (:mod:`.lmstudio`) and
``hf-cache://ORG/REPO[@REV][/FILE]`` (:mod:`.hfcache`) resolve to the local GGUF plus what the store says about it
(:class:`~gguftpl.stores.model.StoreModel`). Each module cites where its layout was read; every read is bounded and
kept inside its store (:mod:`.safety`). Nothing here writes.
"""

from __future__ import annotations

import os

from gguftpl.stores.model import OllamaLayers, StoreModel
from gguftpl.stores.refs import ModelRef, is_ref, parse_ref

__all__ = ["ModelRef", "OllamaLayers", "StoreModel", "is_ref", "local_path", "parse_ref", "resolve", "resolve_model"]


def resolve(spec: str) -> StoreModel:
    """The model a reference names; :class:`~gguftpl.errors.StoreError` (one line) when it cannot be had safely."""
    ref = parse_ref(spec)
    if ref.store == "ollama":
        from gguftpl.stores import ollama

        return ollama.find(ollama.parse_name(ref.name))
    if ref.store == "lmstudio":
        from gguftpl.stores import lmstudio

        return lmstudio.load(ref.name)
    from gguftpl.stores import hfcache

    return hfcache.load(ref.name)


resolve_model = resolve
"""``gguftpl.resolve_model``: :func:`resolve` under the library's name."""


def local_path(spec: str | os.PathLike[str]) -> str:
    """The local file to read for a path or a reference: a reference resolved, anything else unchanged."""
    return resolve(spec).path if isinstance(spec, str) and is_ref(spec) else os.fspath(spec)
