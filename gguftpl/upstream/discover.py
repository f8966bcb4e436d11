"""Which Hugging Face repo a GGUF came from, from what the file says. Never touches the network.

Order: ``general.base_model.N.repo_url`` (the model this one was made from), then
``general.source.huggingface.repository``, then ``general.source.url``; a quantizer's own repo (a name
ending in ``-GGUF``) is skipped in favour of the model it quantizes when both are present. Last, the
bundled catalog: a template whose sha256 matches a catalog template, a model name matching a catalog repo
name, or the tokenizer's fingerprint naming a family the catalog has templates for
(:mod:`gguftpl.upstream.fingerprint`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_HF_URL = re.compile(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/(?:models/)?([^/\s]+/[^/\s?#@]+)")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def repo_from_url(value: Any) -> str | None:
    """``org/name`` from a Hugging Face URL or a bare repo id; None for anything else."""
    if not isinstance(value, str):
        return None
    v = value.strip().rstrip("/")
    m = _HF_URL.match(v)
    if m:
        repo = m.group(1)
        return repo[: -len(".git")] if repo.endswith(".git") else repo
    if _REPO_ID.match(v) and "." not in v.split("/", 1)[0]:
        return v
    return None


def is_quant_repo(repo: str) -> bool:
    """A quantizer's GGUF repo (``ORG/NAME-GGUF``), not the model it quantizes."""
    return repo.lower().endswith(("-gguf", "_gguf", ".gguf"))


@dataclass(frozen=True)
class Discovered:
    repo: str | None
    how: str
    """How it was found (``from general.source.url``, ``matched by tokenizer: Qwen2.5 …``), or why not."""
    entry: Any = None
    """The :class:`~gguftpl.upstream.catalog.CatalogEntry` when the catalog chose the repo: its templates are
    at hand offline (``patch --from-catalog``)."""


def find_upstream_repo(tset: Any) -> tuple[str | None, str]:
    """(repo id or None, how it was found / why not). ``tset`` is a TemplateSet (its ``provenance``
    dict of ``general.*`` keys, its ``templates`` and its vocabulary)."""
    found = discover_upstream(tset)
    return found.repo, found.how


def discover_upstream(tset: Any) -> Discovered:
    """:func:`find_upstream_repo`, saying whether the catalog chose the repo."""
    from gguftpl.upstream.catalog import match_catalog

    return _discover(tset, match_catalog)


class _NeedsTokenizer(Exception):
    """The answer depends on the tokenizer's fingerprint (the expensive part of discovery)."""


def confirm_upstream(tset: Any, repo: str | None, how: str) -> tuple[str | None, str] | None:
    """The discovery's answer for ``tset`` when (``repo``, ``how``), read from the facts cache, may stand: what
    is cheap to find again (metadata, template hashes, model names) is found again and wins over the cache; an
    answer only the tokenizer's fingerprint gives is kept when it names a catalog entry whose family this
    tokenizer could be, or the file's own GGUF repo, or no repo. None: the cached answer cannot be right (a fix
    line never comes from the cache alone: a poisoned entry must not print ``--from-hub evil-org/...``)."""
    from gguftpl.upstream.catalog import load_catalog, match_templates_and_names
    from gguftpl.upstream.fingerprint import could_match

    def no_fingerprint(tset: Any, catalog: Any) -> tuple[Any, str]:
        entry, found = match_templates_and_names(tset, catalog)
        if entry is None and "several" not in found and could_match(tset, catalog.families):
            raise _NeedsTokenizer
        return entry, found

    try:
        found = _discover(tset, no_fingerprint)
    except _NeedsTokenizer:
        pass
    else:
        return found.repo, found.how
    if repo is None:
        return repo, how
    candidates = _metadata_candidates(dict(getattr(tset, "provenance", {}) or {}))
    if candidates and (repo, how) == (candidates[0][0], _gguf_repo_how(candidates[0][1])):
        return repo, how
    catalog = load_catalog()
    entry = catalog.get(repo)
    families = [f for f in catalog.families if entry is not None and f.family == entry.family]
    if families and could_match(tset, families) and how.endswith(f"catalog entry {repo}"):
        return repo, how
    return None


def _metadata_candidates(prov: dict[str, Any]) -> list[tuple[str, str]]:
    """(repo, key) of every metadata key naming a Hugging Face repo, in the order discovery prefers them."""
    candidates: list[tuple[str, str]] = []
    count = prov.get("general.base_model.count")
    n = count if isinstance(count, int) and 0 <= count <= 64 else 8
    for i in range(n):
        key = f"general.base_model.{i}.repo_url"
        repo = repo_from_url(prov.get(key))
        if repo:
            candidates.append((repo, key))
    for key in ("general.source.huggingface.repository", "general.source.url", "general.repo_url", "general.url"):
        repo = repo_from_url(prov.get(key))
        if repo:
            candidates.append((repo, key))
    return candidates


def _gguf_repo_how(key: str) -> str:
    return f"from {key} (a GGUF repo; its templates may not be the original model's)"


def _discover(tset: Any, match: Any) -> Discovered:
    candidates = _metadata_candidates(dict(getattr(tset, "provenance", {}) or {}))
    # Prefer a model repo over a quantizer's GGUF repo: the templates we compare with live in the former.
    for repo, key in candidates:
        if not is_quant_repo(repo):
            return Discovered(repo, f"from {key}")
    from gguftpl.upstream.catalog import load_catalog

    entry, how = match(tset, load_catalog())
    if entry is not None:
        return Discovered(entry.repo_id, how, entry)
    if candidates:
        repo, key = candidates[0]
        return Discovered(repo, _gguf_repo_how(key))
    return Discovered(None, f"no general.base_model/source keys; {how}")
