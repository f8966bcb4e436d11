"""Plan a template patch from an upstream source (Hub, catalog, folder), and the provenance it leaves.

The plan is data: which templates are added, replaced, kept or removed, with sha256s and a unified diff,
and the ``gguftpl.patch.*`` keys to write alongside (``extra_kv`` of ``patching.patch_templates``).

Provenance keys (all strings; written unless ``--no-provenance``):

``gguftpl.patch.tool_version``                  gguftpl version that wrote the file
``gguftpl.patch.source``                        hub | cache | catalog | dir | json
``gguftpl.patch.source_repo``                   upstream repo id (when known)
``gguftpl.patch.revision``                      commit sha the templates were read at (or the revision asked for)
``gguftpl.patch.templates``                     comma-separated names written by this patch
``gguftpl.patch.template.<name>.sha256``        sha256 of the template text written
``gguftpl.patch.template.<name>.replaced_sha256`` sha256 of the text it replaced (absent when added)
``gguftpl.patch.template.<name>.source``        upstream file it came from (tokenizer_config.json, …)
``gguftpl.patch.template.<name>.status``        catalog status EXACT | CORROBORATED | PROXY (catalog only)
``gguftpl.patch.removed``                       comma-separated names removed (when any)

Keys from an earlier gguftpl patch are dropped by a new one (``stale_provenance_keys``), so the file never
claims a provenance it no longer has.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import UsageError
from gguftpl.upstream.config import UpstreamConfig

PROVENANCE_PREFIX = "gguftpl.patch."

ADD, REPLACE, KEEP, REMOVE = "add", "replace", "keep", "remove"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class PlanRow:
    name: str
    action: str
    """add | replace | keep (identical already) | remove"""
    old_sha256: str | None
    new_sha256: str | None
    old_length: int | None = None
    new_length: int | None = None
    diff: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PatchPlan:
    upstream: UpstreamConfig
    rows: list[PlanRow]
    set_templates: dict[str, str]
    """name -> text to write (only names that change)."""
    remove: list[str]
    extra_kv: dict[str, Any] = field(default_factory=dict)
    stale_keys: list[str] = field(default_factory=list)
    """Existing ``gguftpl.patch.*`` keys this patch supersedes."""

    @property
    def changes(self) -> bool:
        return bool(self.set_templates or self.remove)

    def to_dict(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream.to_dict(),
            "rows": [r.to_dict() for r in self.rows],
            "changes": self.changes,
            "provenance": self.extra_kv,
        }


def plan_from_upstream(
    tset: Any,
    upstream: UpstreamConfig,
    *,
    only: list[str] | None = None,
    remove: list[str] | None = None,
    provenance: bool = True,
) -> PatchPlan:
    """What ``patch --from-hub`` would do to ``tset`` (a TemplateSet): every upstream template (or the
    ``only`` ones) is written; templates upstream does not have are kept unless named in ``remove``."""
    from gguftpl.upstream.diff import unified_diff

    if not upstream.templates:
        raise UsageError(f"{upstream.label} has no chat template to copy")
    names = list(upstream.templates)
    if only:
        missing = [n for n in only if n not in upstream.templates]
        if missing:
            raise UsageError(
                f"--only {', '.join(missing)}: not among {upstream.label}'s templates ({', '.join(names)})"
            )
        names = [n for n in names if n in only]
    remove = list(dict.fromkeys(remove or []))
    clash = [n for n in remove if n in names]
    if clash:
        raise UsageError(f"cannot both copy and remove {', '.join(clash)}")
    current: dict[str, str] = {n: t.text for n, t in tset.templates.items()}
    rows: list[PlanRow] = []
    set_templates: dict[str, str] = {}
    for n in names:
        new = upstream.templates[n]
        old = current.get(n)
        row = PlanRow(n, KEEP, None, _sha(new), new_length=len(new.encode("utf-8")))
        if old is not None:
            row.old_sha256, row.old_length = _sha(old), len(old.encode("utf-8"))
        if old is None:
            row.action = ADD
            row.diff = unified_diff("", new, n, upstream.label)
        elif old != new:
            row.action = REPLACE
            row.diff = unified_diff(old, new, n, upstream.label)
        if row.action != KEEP:
            set_templates[n] = new
        rows.append(row)
    for n in remove:
        if n not in current:
            raise UsageError(f"--remove {n}: the GGUF has no template named {n!r}")
        old = current[n]
        rows.append(
            PlanRow(n, REMOVE, _sha(old), None, old_length=len(old.encode("utf-8")), diff=unified_diff(old, "", n, "-"))
        )
    plan = PatchPlan(upstream, rows, set_templates, remove)
    existing = [k for k in getattr(tset, "provenance", {}) if k.startswith(PROVENANCE_PREFIX)]
    if provenance and plan.changes:
        plan.extra_kv = provenance_kv(plan, tset)
        plan.stale_keys = [k for k in existing if k not in plan.extra_kv]
    return plan


def provenance_kv(plan: PatchPlan, tset: Any) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        tool_version = version("gguftpl")
    except PackageNotFoundError:  # pragma: no cover - running from an unpacked tree
        tool_version = "unknown"
    up = plan.upstream
    kv: dict[str, Any] = {
        PROVENANCE_PREFIX + "tool_version": tool_version,
        PROVENANCE_PREFIX + "source": up.origin,
    }
    if up.repo_id:
        kv[PROVENANCE_PREFIX + "source_repo"] = up.repo_id
    rev = up.commit_sha or up.revision_requested
    if rev:
        kv[PROVENANCE_PREFIX + "revision"] = rev
    elif up.origin in ("dir", "json"):
        kv[PROVENANCE_PREFIX + "source_path"] = up.location
    written = [r for r in plan.rows if r.action in (ADD, REPLACE)]
    kv[PROVENANCE_PREFIX + "templates"] = ",".join(r.name for r in written)
    statuses = _catalog_statuses(up)
    for r in written:
        base = f"{PROVENANCE_PREFIX}template.{r.name}."
        kv[base + "sha256"] = r.new_sha256
        if r.action == REPLACE and r.old_sha256:
            kv[base + "replaced_sha256"] = r.old_sha256
        src = up.sources.get(r.name)
        if src:
            kv[base + "source"] = src
        if r.name in statuses:
            kv[base + "status"] = statuses[r.name]
    removed = [r.name for r in plan.rows if r.action == REMOVE]
    if removed:
        kv[PROVENANCE_PREFIX + "removed"] = ",".join(removed)
    return kv


def _catalog_statuses(up: UpstreamConfig) -> dict[str, str]:
    if up.origin != "catalog" or not up.repo_id:
        return {}
    from gguftpl.upstream.catalog import load_catalog

    entry = load_catalog().get(up.repo_id)
    return {n: t.status for n, t in entry.templates.items()} if entry else {}


def read_provenance(tset_or_kv: Any) -> dict[str, Any]:
    """The ``gguftpl.patch.*`` keys of a file (TemplateSet or a plain dict of keys)."""
    kv = getattr(tset_or_kv, "provenance", tset_or_kv) or {}
    return {k: v for k, v in kv.items() if k.startswith(PROVENANCE_PREFIX)}


PLAN_DIFF_LINES = 40


def format_plan(plan: PatchPlan, *, show_diff: bool = True, max_diff_lines: int | None = PLAN_DIFF_LINES) -> str:
    up = plan.upstream
    lines = [f"plan: templates from {up.label} ({up.origin})"]
    for r in plan.rows:
        sha = (r.new_sha256 or r.old_sha256 or "")[:12]
        what = {ADD: "add", REPLACE: "replace", KEEP: "keep (identical)", REMOVE: "remove"}[r.action]
        extra = f" (was {r.old_sha256[:12]})" if r.action == REPLACE and r.old_sha256 else ""
        lines.append(f"  {what:<17} {r.name:<12} {sha}{extra}")
    if not plan.changes:
        lines.append("  nothing to change: the GGUF already has these templates")
    if show_diff:
        for r in plan.rows:
            if r.diff and r.action != KEEP:
                lines.append("")
                diff = r.diff.rstrip("\n").split("\n")
                # a whole added template is a wall of '+' lines: the head is enough, `diff` shows it all
                if max_diff_lines is not None and len(diff) > max_diff_lines:
                    more = len(diff) - max_diff_lines
                    diff = [*diff[:max_diff_lines], f"... {more} more diff lines (gguftpl diff shows them all)"]
                lines.extend(diff)
    if plan.extra_kv:
        lines.append("")
        lines.append("provenance keys:")
        for k, v in plan.extra_kv.items():
            lines.append(f"  {k} = {v}")
    return "\n".join(lines) + "\n"
