"""A patch as text: the plan (one formatter for every source of templates), then what was written, its proof,
and the audit before -> after. Plain strings; the CLI prints them."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gguftpl.gguf.writer import Typed
from gguftpl.patchplan import KEEP, PROVENANCE_PREFIX, REMOVE, PatchPlan, PlanItem

if TYPE_CHECKING:
    from gguftpl.findings import Finding
    from gguftpl.patching import AuditSummary, PatchResult

# a whole added template is a wall of '+' lines: the head is enough (`gguftpl render`/`diff` show it all)
PLAN_DIFF_LINES = 40

# Tool-calling rules (GT2xx) are what a template patch is meant to fix; their before/after is the headline.
TOOL_PREFIX = "GT2"

SEVERITIES = ("error", "warning", "info")


def plan_text(
    plan: PatchPlan, *, show_diff: bool = False, max_diff_lines: int | None = PLAN_DIFF_LINES, label: str | None = None
) -> str:
    """The plan of any patch: one row per template (action, sizes, sha256 prefixes, catalog status) and a line
    for the other keys set or removed; ``show_diff`` adds a unified diff per change (capped at
    ``max_diff_lines``) and lists the other keys one by one. ``label``: what the file is called (a model
    reference such as ``ollama://NAME``, never its blob), default its path."""
    up = plan.upstream
    lines = [f"plan for {label or plan.path}:" + (f" templates from {up.label} ({up.origin})" if up else "")]
    key_width = max((len(it.key) for it in plan.items), default=0)
    statuses = up.statuses if up is not None and up.statuses else {}
    for it in plan.items:
        old, new = (it.old_sha256 or "-")[:12], (it.new_sha256 or "-")[:12]
        shas = f"{old} (identical)" if it.action == KEEP else f"{old} -> {new}"
        row = f"  {it.action:<9} {it.name:<12} {it.key:<{key_width}}  {_sizes(it)}  {shas}"
        if it.action != REMOVE and it.action != KEEP and it.name in statuses:
            row += f"  catalog {statuses[it.name]}"
        lines.append(row)
    if not plan.changes and plan.kept_working:
        lines.append(f"  no template changes: the file {_kept_text(plan)}")
    elif not plan.changes:
        lines.append("  no template changes: the file already has these templates")
    # a text not byte-proven says so whatever is asked (its row says only its status); --show-diff says it of each
    lines += _catalog_status_lines(plan, every=show_diff)
    if show_diff:
        lines += _diff_lines(plan, max_diff_lines)
    item_keys = {it.key for it in plan.items}
    other = [("set", k, v.value if isinstance(v, Typed) else v) for k, v in plan.set_kv.items() if k not in item_keys]
    other += [("remove", k, None) for k in plan.remove_keys if k not in item_keys]
    if other and plan.agrees:
        pass  # keys of a patch that writes nothing would be a plan for nothing
    elif other and show_diff:
        lines += ["", "other keys:"]
        lines += [f"  {what:<9} {k}" + ("" if what == "remove" else f" = {v}") for what, k, v in other]
    elif other:
        n_set, n_removed = sum(1 for w, _, _ in other if w == "set"), sum(1 for w, _, _ in other if w == "remove")
        ours = sum(1 for _, k, _ in other if k.startswith(PROVENANCE_PREFIX))
        mine = f"{ours} of them {PROVENANCE_PREFIX}* provenance; " if ours else ""
        lines.append(
            f"  other keys: {n_set} set, {n_removed} removed ({mine}--show-diff lists them and shows the diff)"
        )
    return "\n".join(lines) + "\n"


def diff_line_count(plan: PatchPlan) -> int:
    """How many lines the plan's diffs take uncapped (the CLI shows a short one on a terminal unasked)."""
    return len(_diff_lines(plan, None))


def _sizes(it: PlanItem) -> str:
    old = f"{len(it.old.text.encode()):,}" if it.old is not None else "-"
    new = f"{len(it.new_text.encode()):,}" if it.new_text is not None else "-"
    return f"{old} B" if it.action == KEEP else f"{old} -> {new} B"


def _diff_lines(plan: PatchPlan, max_diff_lines: int | None) -> list[str]:
    up = plan.upstream
    lines: list[str] = []
    for it in plan.changes:
        new_label = f"upstream:{up.label}:{it.name}" if up else f"new:{it.name}"
        diff = list(
            difflib.unified_diff(
                it.old.text.splitlines() if it.old else [],
                (it.new_text or "").splitlines(),
                f"gguf:{it.name}" if it.old else "/dev/null",
                "/dev/null" if it.action == REMOVE else new_label,
                lineterm="",
            )
        )
        if max_diff_lines is not None and len(diff) > max_diff_lines:
            diff[max_diff_lines:] = [f"... {len(diff) - max_diff_lines} more diff lines"]
        lines += ["", *diff]
    return lines


def _catalog_status_lines(plan: PatchPlan, *, every: bool = True) -> list[str]:
    """Which catalog texts are proven (upstream_templates/index.json), for the templates the plan writes (only the
    ones that are not EXACT unless ``every``)."""
    up = plan.upstream
    if up is None or not up.statuses:
        return []
    from gguftpl.upstream.catalog import proven

    written = [it.name for it in plan.changes if it.action != REMOVE and it.name in up.statuses]
    written = [n for n in written if every or up.statuses[n] != "EXACT"]
    return [f"  catalog {name}: {proven(up.statuses[name])}" for name in written]


def nothing_to_change_text(plan: PatchPlan, label: str | None = None) -> str:
    """The line a patch whose upstream agrees with the file starts with, before its plan."""
    up = plan.upstream
    source = f"{up.label}'s templates" if up is not None else "the templates given"
    if plan.kept_working:
        return f"nothing to change: {label or plan.path} {_kept_text(plan)}; nothing is written\n"
    return f"nothing to change: {label or plan.path} already has {source}; nothing is written\n"


def _kept_text(plan: PatchPlan) -> str:
    """``keeps its default template, which already puts the tool schemas in the prompt (X's would replace it;
    --only default replaces it anyway)``: what ``--from-catalog`` left alone, and why."""
    names = plan.kept_working
    whose = plan.upstream.label if plan.upstream is not None else "upstream"
    one = len(names) == 1
    listed = " and ".join(names)
    return (
        f"keeps its {listed} template{'' if one else 's'}, which already put{'s' if one else ''} the tool schemas in "
        f"the prompt ({whose}'s would replace {'it' if one else 'them'}; --only {names[0]} replaces it anyway)"
    )


def result_text(result: PatchResult) -> str:
    """What was written and its proof, then the audit before -> after (when audited)."""
    if result.proof is None:
        return "nothing written\n"
    p = result.proof
    ident = "identical" if p.data_identical else "DIFFERENT"
    lines = [
        f"wrote {result.output}",
        f"  proof: tensor data {p.data_bytes:,} bytes ({p.copy_method}), {p.proof_method}: "
        f"{ident}; tensor infos {'identical' if p.tensor_infos_identical else 'DIFFERENT'}",
        f"  proof: templates read back from the output: {'as written' if result.readback_ok else 'MISMATCH'} "
        + ", ".join(f"{n}={s[:12]}" for n, s in result.readback.items()),
    ]
    if result.plan.extra_kv:
        lines.append(
            f"  provenance: {len(result.plan.extra_kv)} gguftpl.patch.* keys recorded (gguftpl inspect shows them)"
        )
    if result.runtimes_before is not None and result.runtimes_after is not None:
        from gguftpl.repair import verdict_line

        was, now = verdict_line(result.runtimes_before), verdict_line(result.runtimes_after, result.upstream_own_after)
        lines += ["", "runtimes (input -> output):", f"  input:  {was}", f"  output: {now}"]
        from gguftpl.repair import in_prompt

        reach = {r.name for r in result.runtimes_after.rows if in_prompt(r)}
        if reach == {r.name for r in result.runtimes_before.rows if in_prompt(r)}:
            lines.append("  no change: the tools reach the prompt in the same runtimes as before")
        if result.repair_after is not None and result.repair_after.needed:
            lines.append(f"  still to repair: {result.repair_after.text()}")
    if result.before is not None and result.after is not None and result.summary is not None:
        lines += before_after_lines(result.before, result.after, result.summary)
    return "\n".join(lines) + "\n"


def before_after_lines(before: Sequence[Finding], after: Sequence[Finding], summary: AuditSummary) -> list[str]:
    """The tool-calling findings before and after (the headline), then every finding fixed or introduced."""
    tool_before = [f for f in before if _about_tools(f)]
    tool_after = [f for f in after if _about_tools(f)]
    lines = ["", "tool-calling findings (audit before -> after):"]
    lines.append(f"  before: {_count(tool_before)}")
    lines += [_row(f) for f in tool_before]
    lines.append(f"  after:  {_count(tool_after)}")
    lines += [_row(f) for f in tool_after]
    lines.append(
        f"all findings (audit before -> after): {_counts(summary.counts_before)} -> {_counts(summary.counts_after)}"
    )
    lines.append(f"  fixed:      {_count(summary.fixed)}")
    lines += [_row(f) for f in summary.fixed]
    lines.append(f"  introduced: {_count(summary.introduced)}")
    lines += [_row(f) for f in summary.introduced]
    return lines


def _about_tools(f: Finding) -> bool:
    """A tool-calling finding: a GT2xx, or any saying the tools never reach the prompt (GT101, no template: the
    same verdict as GT201, so a template added to a file with none is no regression in the headline)."""
    from gguftpl.repair import TOOLS_NEVER_REACH

    return f.code.startswith(TOOL_PREFIX) or f.extra.get("verdict") == TOOLS_NEVER_REACH


def _row(f: Finding) -> str:
    """``GT106 info    default    message-shape-crash (content as text parts)``: the code, severity, template,
    rule and what kind of message it is (two findings of one rule differ in it); one from upstream's own
    template says so."""
    kind = f.extra.get("probe") or f.extra.get("marker") or f.extra.get("engine") or ""
    if f.extra.get("verdict"):
        kind = "the tools never reach the prompt"
    row = f"    {f.code} {f.severity.value:<7} {f.template or '-':<10} {f.name}" + (f" ({kind})" if kind else "")
    up = f.extra.get("from_upstream")
    return row + (f": from upstream's own template ({up})" if up else "")


def _count(findings: Sequence[Finding]) -> str:
    by: dict[str, int] = {}
    for f in findings:
        by[f.severity.value] = by.get(f.severity.value, 0) + 1
    return _counts(by)


def _counts(by: dict[str, int]) -> str:
    return ", ".join(f"{by[s]} {s}" for s in SEVERITIES if by.get(s)) or "none"
