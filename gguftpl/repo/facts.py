"""The facts the repo checks read: one summary per quant, and what each model group's upstream said.

A quant's summary (its templates, special tokens and model group) is taken from its header once, here;
the upstream of each group is read once, in ``gguftpl.repo.upstream``. The GT55x checks in
``gguftpl/rules/repo.py`` only read a ``RepoFacts``; ``check_repo`` runs every check registered for the
``repo`` scope.

"Quants of the same model" is decided from the headers, never from file names: files are grouped by
architecture, tokenizer model and vocabulary size (a projector or a draft model lands in its own group).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gguftpl.findings import Finding, checks
from gguftpl.gguf.conversion import conversion_key
from gguftpl.gguf.shards import ShardInfo, shard_info

__all__ = [
    "QuantEntry",
    "QuantSummary",
    "RepoFacts",
    "UpstreamFacts",
    "check_repo",
    "freeze",
    "majority",
    "plan_entries",
    "same_text",
    "summarize",
    "template_names",
    "unsafe_entry",
]


# --------------------------------------------------------------------------------------------- one quant


@dataclass(frozen=True)
class QuantSummary:
    """What the repo checks need of one quant's header."""

    templates: Mapping[str, str]
    """Template name -> text."""
    special: Mapping[str, Any]
    """Role -> [id, text] (and ``add_bos``/``add_eos`` -> bool)."""
    group: str
    """Model group: architecture / tokenizer / vocabulary size."""
    upstream_repo: str | None = None
    """What the file says it came from (metadata, bundled catalog); no network."""


@dataclass(frozen=True)
class QuantEntry:
    """One GGUF of the repo or folder: where it is, what its header said, and its own audit."""

    label: str
    """How reports name the file: a path, or ``hf://ORG/REPO/FILE@COMMIT``."""
    name: str
    """Path inside the repo or folder (``Q4_K_M/model-00001-of-00002.gguf``)."""
    size: int | None = None
    shard: ShardInfo | None = None
    skipped: str | None = None
    """Why the header was not read (a later shard of a split GGUF)."""
    error: str | None = None
    group: str | None = None
    """Model group (architecture / tokenizer / vocabulary size); None when the header was not read."""
    templates: Mapping[str, str] = field(default_factory=dict)
    """Template name -> text."""
    special: Mapping[str, Any] = field(default_factory=dict)
    """Role -> [id, text] (and ``add_bos``/``add_eos`` -> bool)."""
    upstream_repo: str | None = None
    remote: Mapping[str, Any] | None = None
    """The ``"remote"`` object of a Hub read (url, bytes_fetched, requests, revision …)."""
    audit: Any = None
    """``gguftpl.audit.FileAudit`` of this file."""
    unsafe: str | None = None
    """Why the listed name is no safe repo path (``../../x.gguf``); such an entry is never read."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "name": self.name,
            "size": self.size,
            "shard": None if self.shard is None else self.shard.to_dict(),
            "skipped": self.skipped,
            "error": self.error,
            "group": self.group,
            "templates": {n: hashlib.sha256(t.encode("utf-8")).hexdigest() for n, t in sorted(self.templates.items())},
            "special": dict(self.special),
            "upstream_repo": self.upstream_repo,
            "remote": None if self.remote is None else dict(self.remote),
            **({"unsafe": self.unsafe} if self.unsafe else {}),
        }


def plan_entries(names: Iterable[tuple[str, int | None]], label_of: Callable[[str], str]) -> list[QuantEntry]:
    """One entry per GGUF (path in the repo, size), sorted; later shards of a split set are listed, not read."""
    out: list[QuantEntry] = []
    for name, size in sorted(names):
        shard = shard_info(name)
        skipped = None
        if shard is not None and not shard.is_first:
            skipped = f"shard {shard.number} of {shard.count}: the metadata is in {shard.first}"
        out.append(QuantEntry(label=label_of(name), name=name, size=size, shard=shard, skipped=skipped))
    return out


def unsafe_entry(target: str, name: str, why: str) -> QuantEntry:
    """An entry for a listed name that is never requested: reported under the repo, never built into a URL."""
    return QuantEntry(label=target, name=name, skipped=f"not read: {why}", unsafe=why)


def summarize(header: Any, memo: dict[str, QuantSummary] | None = None) -> QuantSummary:
    """The summary of one header; ``memo`` reuses it for another quant of the same conversion."""
    key = conversion_key(header) if memo is not None else None
    if memo is not None and key is not None and key in memo:
        return memo[key]
    summary = _summarize_fresh(header)
    if memo is not None and key is not None:
        memo[key] = summary
    return summary


def _summarize_fresh(header: Any) -> QuantSummary:
    from gguftpl.gguf.templateset import load_templateset

    ts = load_templateset(header)
    special: dict[str, Any] = {role: [tok.id, tok.text] for role, tok in sorted(ts.special_tokens.items())}
    if ts.add_bos is not None:
        special["add_bos"] = ts.add_bos
    if ts.add_eos is not None:
        special["add_eos"] = ts.add_eos
    try:  # what the file says it came from (metadata, bundled catalog); no network
        from gguftpl.upstream.discover import find_upstream_repo

        upstream_repo = find_upstream_repo(ts)[0]
    except Exception:  # noqa: BLE001 - discovery is optional; the audit reports its own problems
        upstream_repo = None
    return QuantSummary(
        templates={name: t.text for name, t in ts.templates.items()},
        special=special,
        group=f"{ts.architecture or '?'} / {ts.tokenizer_model or 'no tokenizer'} / {ts.vocab_size or 0} tokens",
        upstream_repo=upstream_repo,
    )


# --------------------------------------------------------------------------------------------- the repo


@dataclass(frozen=True)
class UpstreamFacts:
    """What one model group's upstream said, or why it was not asked."""

    repo: str | None
    how: str
    """``given with --upstream`` or ``from the files' metadata or the bundled catalog``."""
    status: str
    """``checked``, ``unknown`` (no upstream known) or ``unreachable`` (known, could not be read)."""
    error: str | None = None
    templates: Mapping[str, str] = field(default_factory=dict)
    """Upstream's name -> text (``checked`` only)."""
    complete: bool = True
    """False when the source may not list every template upstream ships (a partial catalog entry)."""
    label: str = ""
    """``ORG/REPO@COMMIT`` (or where it was read from) for messages."""
    revision: str | None = None
    origin: str | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """One group of the ``"upstream"`` object in the JSON report."""
        d: dict[str, Any] = {"repo": self.repo, "how": self.how, "status": self.status}
        if self.status == "unreachable":
            d["error"] = self.error
        elif self.status == "checked":
            d.update(revision=self.revision, origin=self.origin, warnings=list(self.warnings))
        return d


@dataclass(frozen=True)
class RepoFacts:
    """Everything the GT55x checks read: the quants of one repo or folder and each group's upstream."""

    target: str
    """``hf://ORG/REPO@COMMIT`` or the folder: where repo-level findings are reported."""
    quants: tuple[QuantEntry, ...]
    upstream: Mapping[str, UpstreamFacts] = field(default_factory=dict)
    """Model group -> its upstream (only groups that were compared, or that could not be)."""

    def groups(self) -> dict[str, list[QuantEntry]]:
        """Model group -> the quants whose header was read, in listing order; groups sorted by name."""
        out: dict[str, list[QuantEntry]] = {}
        for e in self.quants:
            if e.group is not None:
                out.setdefault(e.group, []).append(e)
        return dict(sorted(out.items()))

    def upstream_templates(self, group: str) -> Mapping[str, str]:
        up = self.upstream.get(group)
        return up.templates if up is not None else {}

    def majority(self, group: str, members: Sequence[QuantEntry], name: str) -> tuple[str, list[str]] | None:
        """(the most common text of template ``name`` among ``members``, the quants carrying it); a tie goes
        to upstream's text when it is among the tied, else to the first seen. None when none carries it."""
        having = [(e.name, e.templates[name]) for e in members if name in e.templates]
        if not having:
            return None
        text = majority(having, prefer=self.upstream_templates(group).get(name))
        return text, [n for n, t in having if same_text(t, text)]

    def concerning(self, members: Iterable[QuantEntry]) -> dict[str, Any]:
        """Which repo or folder and which quants a finding concerns, for every report format."""
        return {"repo": self.target, "quants": [e.name for e in members]}


def template_names(members: Iterable[QuantEntry], more: Iterable[str] = ()) -> list[str]:
    """Every template name the members (and ``more``) have, ``default`` first."""
    return sorted({n for e in members for n in e.templates} | set(more), key=lambda n: (n != "default", n))


def majority(values: Sequence[tuple[str, Any]], prefer: Any = None) -> Any:
    """Most common value among (label, value); ties go to ``prefer`` if tied, else the first seen."""
    counts = Counter(freeze(v) for _, v in values)
    best = max(counts.values())
    tied = [v for _, v in values if counts[freeze(v)] == best]
    if prefer is not None and any(freeze(v) == freeze(prefer) for v in tied):
        return prefer
    return tied[0]


def freeze(v: Any) -> Any:
    """A hashable stand-in for a special-token value ([id, text] lists)."""
    if isinstance(v, list):
        return tuple(freeze(x) for x in v)
    return v


def same_text(a: str, b: str) -> bool:
    """Equal templates. jinja2 drops one trailing newline of a template source (keep_trailing_newline=False,
    the setting transformers renders with), so `chat_template.jinja`'s final newline makes no other template."""
    return a == b or _drop_final_newline(a) == _drop_final_newline(b)


def _drop_final_newline(s: str) -> str:
    if s.endswith("\r\n"):
        return s[:-2]
    return s[:-1] if s.endswith("\n") else s


def check_repo(facts: RepoFacts, keep: Callable[[str], bool] | None = None) -> list[Finding]:
    """Run every ``repo`` check (those whose rule ``keep`` lets through) over the facts."""
    found: list[Finding] = []
    for rule, fn in checks("repo"):
        if keep is None or keep(rule.code):
            found.extend(fn(facts))
    return found
