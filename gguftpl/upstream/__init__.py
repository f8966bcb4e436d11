"""Hugging Face sources and the bundled catalog of known-good upstream templates.

Nothing here imports huggingface_hub at module level; ``fetch_upstream`` does, when it runs.
"""

from gguftpl.upstream.catalog import Catalog, CatalogEntry, catalog_upstream, load_catalog
from gguftpl.upstream.config import UpstreamConfig, UpstreamSpecial, sanitize_template_name
from gguftpl.upstream.discover import find_upstream_repo, repo_from_url
from gguftpl.upstream.hub import fetch_upstream, load_upstream_dir, parse_repo_ref

__all__ = [
    "Catalog",
    "CatalogEntry",
    "UpstreamConfig",
    "UpstreamSpecial",
    "catalog_upstream",
    "fetch_upstream",
    "find_upstream_repo",
    "load_catalog",
    "load_upstream_dir",
    "parse_repo_ref",
    "repo_from_url",
    "sanitize_template_name",
]
