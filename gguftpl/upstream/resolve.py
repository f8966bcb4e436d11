"""Pick the upstream a GGUF is compared with or patched from: a Hub repo, a local folder or JSON, a bundled
catalog entry, or (none given) the repo the GGUF's metadata or the catalog points at.

Shared by ``diff`` and ``patch``. Nothing here prints: what the user should hear (a Hub fallback, a catalog
entry matched by name) comes back as ``ResolvedUpstream.warnings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gguftpl.errors import HubUnreachableError, UsageError

if TYPE_CHECKING:
    from gguftpl.gguf.templateset import TemplateSet
    from gguftpl.upstream.config import UpstreamConfig

AUTO = "auto"
"""``catalog=AUTO``: the catalog entry that matches the GGUF (name, template hash)."""


@dataclass(frozen=True)
class UpstreamSource:
    """Where the upstream templates come from: at most one of ``repo``, ``folder`` and ``catalog``; none of
    them means "discover it from the GGUF"."""

    repo: str | None = None
    """Hugging Face repo ``ORG/NAME``, optionally ``@REV``."""
    revision: str | None = None
    """Branch, tag or commit of ``repo`` (default main, or the ``@REV`` in ``repo``)."""
    folder: str | None = None
    """A local folder laid out like a repo, or a tokenizer_config.json / bundle JSON."""
    catalog: str | None = None
    """A bundled catalog entry ``ORG/NAME``, or ``"auto"`` for the one matching the GGUF."""
    fallback: bool = True
    """Fall back to the bundled catalog (loudly) when the Hub cannot be reached."""
    accept_family: bool = True
    """A named ``catalog`` entry that is a neighbour of the GGUF (not its upstream) whose vocabulary or special
    tokens differ is refused unless True (``patch --accept-family``; ``diff`` compares with anything)."""
    labels: tuple[str, str, str] = ("--hub", "--upstream", "--catalog")
    """How the caller names ``repo``, ``folder`` and ``catalog`` in messages (CLI options by default)."""

    def __post_init__(self) -> None:
        given = [label for label, v in zip(self.labels, (self.repo, self.folder, self.catalog), strict=True) if v]
        if len(given) > 1:
            raise UsageError(f"{' and '.join(given)} cannot be used together")


@dataclass(frozen=True)
class ResolvedUpstream:
    config: UpstreamConfig
    """The upstream templates and special tokens."""
    how: str
    """How it was chosen (``--hub``, ``bundled catalog (matched)``, ``discovered from …``), for the report."""

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the user should be told: a catalog stand-in for an unreachable Hub, a matched entry, …"""
        return tuple(self.config.warnings)


def resolve_upstream(tset: TemplateSet, source: UpstreamSource) -> ResolvedUpstream:
    """The upstream ``source`` names for the GGUF of ``tset`` (which is only read to discover or match it)."""
    if source.folder:
        from gguftpl.upstream.hub import load_upstream_dir

        return ResolvedUpstream(load_upstream_dir(source.folder), f"--upstream {source.folder}")
    if source.catalog:
        from gguftpl.upstream.catalog import catalog_upstream

        if source.catalog == AUTO:
            return ResolvedUpstream(catalog_upstream(None, tset=tset), "bundled catalog (matched)")
        return ResolvedUpstream(
            catalog_upstream(source.catalog, tset=tset, accept_family=source.accept_family), "bundled catalog"
        )
    from gguftpl.upstream.hub import fetch_upstream, parse_repo_ref

    entry = None
    if source.repo:
        repo, rev = parse_repo_ref(source.repo)
        how = "--hub"
    else:
        from gguftpl.upstream.discover import discover_upstream

        found = discover_upstream(tset)
        if found.repo is None:
            raise UsageError(f"cannot tell which repo this GGUF came from ({found.how}); pass --hub ORG/NAME")
        repo, rev, entry = found.repo, None, found.entry
        how = f"discovered {found.how}"
    try:
        config = fetch_upstream(repo, source.revision or rev, catalog_fallback=source.fallback)
    except HubUnreachableError as exc:
        if entry is None or not source.fallback or source.revision:
            raise
        # the catalog chose this repo: its bundled entry is what the file was matched against, so compare with
        # it rather than stop for want of the Hub (and say so)
        config = entry.to_upstream()
        config.warnings.insert(0, f"the Hub could not be reached ({exc}); compared with the bundled catalog entry")
        how = f"{how}; compared with that entry, the Hub being unreachable"
    return ResolvedUpstream(config, how)
