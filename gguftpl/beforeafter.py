"""The audit before -> after a patch: counts per severity, and which findings were fixed or introduced, matched by
the finding's identity (code, template, key, message kind); every finding saying that the tools never reach the
prompt is one verdict (``gguftpl.repair.TOOLS_NEVER_REACH``), whatever drops them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gguftpl.findings import Finding


@dataclass(frozen=True)
class AuditSummary:
    """The audit before -> after, counting every finding (not only the tool-calling ones)."""

    counts_before: dict[str, int]
    """severity -> number of findings before the patch (every severity, zeros included)."""
    counts_after: dict[str, int]
    fixed: tuple[Finding, ...]
    """Findings before that are gone after (matched by code, template and key; each one counted)."""
    introduced: tuple[Finding, ...]
    """Findings after that were not there before."""


def summarize(before: Sequence[Finding], after: Sequence[Finding]) -> AuditSummary:
    """Counts per severity of every finding, and which were fixed or introduced (a finding is the same one
    after when its identity is, :func:`identity`: code, template, key and what kind of message it is; those of
    one identity are matched with the same severity first; two alike count twice)."""

    def counts(fs: Sequence[Finding]) -> dict[str, int]:
        by = {s: 0 for s in ("error", "warning", "info")}
        for f in fs:
            by[f.severity.value] = by.get(f.severity.value, 0) + 1
        return by

    def unmatched(these: Sequence[Finding], others: Sequence[Finding]) -> tuple[Finding, ...]:
        exact = Counter((identity(f), f.severity) for f in others)
        left = Counter(identity(f) for f in others)
        first = []  # pass 1: the same finding with the same severity (two GT106 of one template differ in it)
        for f in these:
            if exact[(identity(f), f.severity)] > 0:
                exact[(identity(f), f.severity)] -= 1
                left[identity(f)] -= 1
            else:
                first.append(f)
        out = []
        for f in first:  # pass 2: the same finding whose severity changed
            if left[identity(f)] > 0:
                left[identity(f)] -= 1
            else:
                out.append(f)
        return tuple(out)

    return AuditSummary(counts(before), counts(after), unmatched(before, after), unmatched(after, before))


KIND_KEYS = ("probe", "marker", "engine", "runtime", "runtimes", "stage", "check", "dialect")
"""The extras of a finding that say what kind of message it is (GT106 on a null content or on text parts)."""


def identity(f: Finding) -> tuple[Any, ...]:
    """What makes a finding the same one before and after a patch: its code, template, key and message kind
    (``KIND_KEYS``); the file name differs between input and output, and messages may quote it, so neither counts.
    Every finding saying that the tools never reach the prompt is one verdict whatever drops them (no template,
    llama.cpp's ChatML fallback, a template that ignores them): the same finding (``gguftpl.repair``)."""
    from gguftpl.repair import TOOLS_NEVER_REACH

    if f.extra.get("verdict") == TOOLS_NEVER_REACH:
        return (TOOLS_NEVER_REACH,)
    kind = tuple((k, str(f.extra[k])) for k in KIND_KEYS if k in f.extra)
    return f.code, f.template, f.location.key, kind
