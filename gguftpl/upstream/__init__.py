"""Hugging Face sources and the bundled catalog of known-good upstream templates.

Nothing here imports huggingface_hub at module level; ``fetch_upstream`` does, when it runs. The names below are
resolved on first use (PEP 562): a local audit imports ``upstream.catalog`` for the fingerprint match and must not
pay for the Hub client modules (``hub``, ``config``: ~30 ms of a cold start).
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "Catalog": "gguftpl.upstream.catalog",
    "CatalogEntry": "gguftpl.upstream.catalog",
    "catalog_upstream": "gguftpl.upstream.catalog",
    "load_catalog": "gguftpl.upstream.catalog",
    "UpstreamConfig": "gguftpl.upstream.config",
    "UpstreamSpecial": "gguftpl.upstream.config",
    "sanitize_template_name": "gguftpl.upstream.config",
    "find_upstream_repo": "gguftpl.upstream.discover",
    "repo_from_url": "gguftpl.upstream.discover",
    "fetch_upstream": "gguftpl.upstream.hub",
    "load_upstream_dir": "gguftpl.upstream.hub",
    "parse_repo_ref": "gguftpl.upstream.hub",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gguftpl.upstream' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = sorted(_LAZY)
