"""Which upstream model each group of quants came from, and what its templates are (the network step).

Read once per model group, before the checks run: the repo given with ``--upstream``, else the one the
quants' metadata or the bundled catalog names (the majority, when they disagree). A group with no chat
template is skipped unless an upstream was named: a projector or an embedding model has nothing to
compare. An unreachable Hub is a fact (``unreachable``), reported as GT554, not an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from gguftpl.errors import HubError
from gguftpl.repo.facts import QuantEntry, UpstreamFacts, majority

__all__ = ["upstream_facts"]

_GIVEN = "given with --upstream"
_FOUND = "from the files' metadata or the bundled catalog"


def upstream_facts(
    groups: Mapping[str, Sequence[QuantEntry]],
    upstream: bool | str,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> dict[str, UpstreamFacts] | None:
    """Model group -> its upstream. ``upstream``: True = the one the files name, a repo id = that one,
    False = none (returns None, as when no header was read)."""
    if upstream is False or not groups:
        return None
    out: dict[str, UpstreamFacts] = {}
    for gname, members in sorted(groups.items()):
        if isinstance(upstream, str):
            repo: str | None = upstream
            how = _GIVEN
        elif not any(m.templates for m in members):
            continue  # no chat model (a projector, an embedding model): nothing to compare
        else:
            candidates = [(m.name, m.upstream_repo) for m in members if m.upstream_repo]
            repo = majority(candidates) if candidates else None
            how = _FOUND
        out[gname] = _read(repo, how, endpoint, token, cache_dir)
    return out


def _read(
    repo: str | None,
    how: str,
    endpoint: str | None,
    token: str | bool | None,
    cache_dir: str | os.PathLike[str] | None,
) -> UpstreamFacts:
    if repo is None:
        return UpstreamFacts(repo=None, how=how, status="unknown")
    from gguftpl.upstream.hub import fetch_upstream

    try:
        tok = token if isinstance(token, str) else None
        cfg = fetch_upstream(repo, endpoint=endpoint, token=tok, cache_dir=cache_dir, catalog_fallback=True)
    except HubError as exc:
        return UpstreamFacts(repo=repo, how=how, status="unreachable", error=str(exc))
    return UpstreamFacts(
        repo=repo,
        how=how,
        status="checked",
        templates=dict(cfg.templates),
        complete=cfg.complete,
        label=cfg.label,
        revision=cfg.commit_sha,
        origin=cfg.origin,
        warnings=tuple(cfg.warnings),
    )
