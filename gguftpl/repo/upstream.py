"""Which upstream model each group of quants came from, and what its templates are (the network step).

Read once per model group, before the checks run: the repo given with ``--upstream``, else the one the
quants' metadata or the bundled catalog names (the majority, when they disagree). A group with no chat
template is skipped unless an upstream was named: a projector or an embedding model has nothing to
compare. An unreachable Hub is a fact (``unreachable``), reported as GT554, not an error. A caller that has
read a repo's templates already (a folder patch, which resolved its upstream once) passes them as ``known``:
that repo is not read again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gguftpl.errors import HubError
from gguftpl.repo.facts import QuantEntry, UpstreamFacts, majority

if TYPE_CHECKING:
    from gguftpl.upstream.config import UpstreamConfig

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
    known: Mapping[str, UpstreamConfig] | None = None,
) -> dict[str, UpstreamFacts] | None:
    """Model group -> its upstream. ``upstream``: True = the one the files name, a repo id = that one,
    False = none (returns None, as when no header was read). ``known``: repo id -> its templates as already
    read by the caller in this process, used instead of reading that repo again."""
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
        ready = (known or {}).get(repo) if repo is not None else None
        if repo is not None and ready is not None:
            out[gname] = _facts(repo, how, ready)
        else:
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
    return _facts(repo, how, cfg)


def _facts(repo: str, how: str, cfg: UpstreamConfig) -> UpstreamFacts:
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
